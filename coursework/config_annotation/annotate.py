"""Judge one field's annotation: does it state the right concept for the field's value?

Not keyword spotting: the text is cut into sentences (``.`` ``;`` ``。`` ``；`` newlines and
contrast words such as "but" / "而") and clauses (commas), and each facet mention gets a
polarity. A negator ("not", "不", "without") negates the facets after it in its clause, or
the ones before it when nothing follows ("parameters are not sharded"). "only" / "只"
makes a clause exclusive within a group of facets ("optimizer states only" rules out
parameters). Sentences that talk about a different value ("ZeRO-1 ...") are set aside.

Outcomes: ``missing`` (no annotation), ``correct``, ``partial`` (right concept, some
required statement absent), ``contradiction`` (states something false for this value, or
negates a required statement), ``wrong_concept`` / ``unrelated`` (none of it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from coursework.quiz import textmatch
from coursework.config_annotation.catalogue import Catalogue, Rule

SOFT_BREAK = re.compile(r"[,，、:：()（）\[\]]")


class Verdict(str, Enum):
    MISSING = "missing"
    CORRECT = "correct"
    PARTIAL = "partial"
    CONTRADICTION = "contradiction"
    WRONG_CONCEPT = "wrong_concept"
    UNRELATED = "unrelated"


@dataclass
class Clause:
    """Facets of one comma-delimited clause, by polarity."""

    positive: set[str] = field(default_factory=set)
    negated: set[str] = field(default_factory=set)
    reduced: set[str] = field(default_factory=set)
    exclusive: bool = False
    compares: bool = False  # "like fp16", "than bf16", "和 fp16 一样": about this value, by comparison
    unread: int = 0  # words (Latin) or characters (Chinese) the vocabulary does not know
    words: set[str] = field(default_factory=set)  # the words that named a facet, as written
    consequence: bool = False  # "so no GPU holds a full copy": a result of what was said, not a denial of it
    opens_contrast: bool = False  # "unlike stage 3", "不像 ZeRO-2": names another value to set this one apart
    relative: bool = False  # "which also shards gradients": says more about the clause before it


@dataclass
class Sentence:
    clauses: list[Clause] = field(default_factory=list)

    @property
    def positive(self) -> set[str]:
        return set().union(*(c.positive for c in self.clauses)) if self.clauses else set()

    @property
    def mentioned(self) -> set[str]:
        return set().union(*(c.positive | c.negated | c.reduced for c in self.clauses)) if self.clauses else set()


@dataclass
class Judgement:
    """The verdict on one annotation, with what was satisfied, missing or wrong."""

    verdict: Verdict
    satisfied: int = 0
    required: int = 0
    missing: list[str] = field(default_factory=list)  # requirement items not met
    wrong: list[str] = field(default_factory=list)  # facets stated wrongly
    other_concept: str | None = None
    confidence: float = 1.0  # how sure the reading is (see ``_confidence``)
    signs: list[str] = field(default_factory=list)
    wrong_words: dict[str, list[str]] = field(default_factory=dict)  # wrong facet -> the words read as it

    @property
    def needs_review(self) -> bool:
        return self.confidence < REVIEW_BELOW

    @property
    def fraction(self) -> float:
        if self.verdict == Verdict.CORRECT:
            return 1.0
        if self.verdict == Verdict.PARTIAL and self.required:
            return self.satisfied / self.required
        return 0.0


def _vocabulary(catalogue: Catalogue) -> frozenset[str]:
    words = [w for langs in catalogue.raw["terms"].values() for w in langs.get("en", [])]
    return textmatch.vocabulary([str(w) for w in words])


def prepare(text: str, catalogue: Catalogue) -> str:
    """The shared reading's first steps (``coursework.quiz.textmatch``): NFKC, case, enumerated
    stages spelled out, near-miss Latin words corrected towards the catalogue's words."""
    return textmatch.spell_fix(textmatch.normalise(text), _vocabulary(catalogue))[0]


def _split_sentences(text: str, catalogue: Catalogue) -> list[list[str]]:
    """Sentences as lists of clause strings (lowercased)."""
    text = re.sub(r"\s+", " ", prepare(text, catalogue)).strip()
    contrast = catalogue.raw.get("contrast", {})
    words = sorted({w.lower() for lang in ("en", "zh") for w in contrast.get(lang, [])}, key=len, reverse=True)
    pattern = "|".join(rf"(?<![a-z0-9_]){re.escape(w)}(?![a-z0-9_])" if w.isascii() else re.escape(w)
                       for w in words)
    if pattern:
        # a word that only contains a contrast word ("反而" holds "而") stays whole
        joined = sorted({w.lower() for w in contrast.get("not_contrast", [])}, key=len, reverse=True)
        if joined:
            pattern = "|".join(map(re.escape, joined)) + "|" + pattern
        text = re.sub(pattern, lambda m: m.group(0) if m.group(0) in joined else " \n" + m.group(0) + " ", text)
    out = []
    for sent in re.split(r"\n|[;!?]|\.(?=\s|$)|[。；！？]", text):  # NFKC made "？" a "?": it ends a sentence anywhere
        clauses = [c.strip() for c in SOFT_BREAK.split(sent) if c.strip()]
        if clauses:
            out.append(clauses)
    return out


# A clause opening with one of these states a consequence of the previous one: its negation
# ("so no GPU holds a full copy", "所以没有一张卡有完整的梯度") describes the result of sharding, it
# does not deny the states just listed.
CONSEQUENCE = re.compile(r"^(?:so|hence|thus|therefore|which means|meaning|as a result|so that|所以|因此|因而|于是|从而|这样|故)(?![a-z])")
# A clause opening with one of these names another value only to set this one apart from it; the
# clauses right after it that open with a relative word describe that other value too.
OPENS_CONTRAST = re.compile(r"^(?:unlike|in contrast to|contrary to|as opposed to|compared (?:to|with)|different from|"
                            r"不像|不同于|区别于|相比|对比|(?:和|与|跟|同).{1,16}(?:不同|不一样|相比|比起来))")
RELATIVE = re.compile(r"^(?:which|that|who|where|whose|它|那)")
# A switch said to be off after the facet it switches ("卸载是关的", "offload is switched off"): the
# facet right before it is denied, as a negator before it would deny it.
OFF_AFTER = re.compile(r"(?:是)?关(?:着|闭)?的|关着|(?<![a-z])(?:is|are|was|stays|kept) (?:switched |turned )?off(?![a-z])")


def _analyse_clause(text: str, catalogue: Catalogue) -> Clause:
    tokens = catalogue.matcher.find(text)
    head = text.strip()
    clause = Clause(consequence=bool(CONSEQUENCE.match(head)), opens_contrast=bool(OPENS_CONTRAST.match(head)),
                    relative=bool(RELATIVE.match(head)))
    rest = text
    for start, word, _ in sorted(tokens, reverse=True):
        rest = rest[:start] + " " + rest[start + len(word):]
    rest = re.sub(r"[和与及的也都是了and the a of on in to]", " ", re.sub(r"(?<![a-z])(?:and|the|a|of|on|in|to|is|are)(?![a-z])", " ", rest))
    clause.unread = len(re.findall(r"[a-z]{2,}", rest)) + len(re.findall(r"[\u4e00-\u9fff]", rest))
    facet_tokens = [(i, {k[6:] for k in kinds if k.startswith("facet:")}) for i, (_, _, kinds) in enumerate(tokens)]
    facet_tokens = [(i, f) for i, f in facet_tokens if f]
    clause.words = {tokens[i][1] for i, _ in facet_tokens}
    negated_idx: set[int] = set()
    reduced_idx: set[int] = set()
    predicates = set(catalogue.raw.get("antonyms", {}).values())
    for i, (_, _, kinds) in enumerate(tokens):
        if "exclusive" in kinds and not any(k.startswith("facet:") for k in kinds):
            clause.exclusive = True
        if "compare" in kinds:
            clause.compares = True
        for kind, target in (("negators", negated_idx), ("reducers", reduced_idx)):
            if kind in kinds and not any(k.startswith("facet:") for k in kinds) and "neutral" not in kinds:
                after = [j for j, _ in facet_tokens if j > i]
                target.update(after or [j for j, _ in facet_tokens if j < i])
                if kind == "negators" and after and all(f & predicates for j, f in facet_tokens if j in after[:1]):
                    # "参数不切", "parameters are not sharded": the negated verb denies its object too
                    target.update(j for j, _ in facet_tokens if j < i)
    for m in OFF_AFTER.finditer(text):
        before = [j for j, _ in facet_tokens if tokens[j][0] < m.start()]
        if before:
            negated_idx.add(before[-1])
    saving = set(catalogue.raw.get("saving_facets", []))
    for j, facets in facet_tokens:
        if j in reduced_idx and facets <= saving:
            reduced_idx.discard(j)  # "才通信一次": once is the saving itself
        if j in negated_idx:
            clause.negated |= facets
        elif j in reduced_idx:
            clause.reduced |= facets
        else:
            clause.positive |= facets
    # "not replicated", "不复制到每张卡": denying a verb's opposite states the verb ("sharded")
    antonyms = catalogue.raw.get("antonyms", {})
    for a in clause.negated & set(antonyms):
        clause.negated.discard(a)
        clause.positive.add(antonyms[a])
    return clause


def analyse(text: str, catalogue: Catalogue) -> list[Sentence]:
    """The annotation as sentences of clauses with facet polarities."""
    return [Sentence([_analyse_clause(c, catalogue) for c in clauses])
            for clauses in _split_sentences(text, catalogue)]


def _item_met(item: str, positive: set[str], negative: set[str]) -> bool:
    for alt in item.split("|"):
        ok = True
        for f in alt.split("&"):
            if f.startswith("~"):
                ok = ok and f[1:] in negative
            else:
                ok = ok and f in positive
        if ok:
            return True
    return False


def _positive_facets(item: str) -> set[str]:
    return {f for alt in item.split("|") for f in alt.split("&") if not f.startswith("~")}


def _ordered_facets(item: str) -> list[str]:
    return [f for alt in item.split("|") for f in alt.split("&") if not f.startswith("~")]


def _other_concept(sentences: list[Sentence], rule: Rule, catalogue: Catalogue) -> str | None:
    """The concept this annotation describes instead, if its signature clearly matches another."""
    said = set().union(*(s.positive for s in sentences)) if sentences else set()
    own = set(catalogue.concepts[rule.concept].get("signature", []))
    best, best_hits = None, 0
    for cid, c in catalogue.concepts.items():
        if cid == rule.concept:
            continue
        hits = len((set(c.get("signature", [])) - own) & said)
        if hits > best_hits:
            best, best_hits = cid, hits
    return best


def _claims(c: Clause, facet: str) -> bool:
    """Does the clause state ``facet`` (``~facet``: deny it, "fp16 needs no loss scaling";
    ``-facet``: deny or lessen it, "skips the all-gather")?"""
    if facet.startswith("~"):
        return facet[1:] in c.negated
    if facet.startswith("-"):
        return facet[1:] in (c.negated | c.reduced)
    return facet in c.positive


def _forbidden_claim(s: Sentence, bad: list[str], predicates: set[str], antonyms: dict[str, str]) -> bool:
    """Does one clause claim all of ``bad`` (e.g. shard + parameters)? A clause without a verb
    of its own ("参数、梯度、优化器状态全部切分") takes the nearest one of its sentence, the
    following clause first; a clause that denies the verb ("参数不切") or states its opposite
    ("参数每卡完整保留") claims nothing of it."""
    preds = [f for f in bad if f in predicates]
    objects = [f for f in bad if f not in predicates]
    opposite = {a for a, target in antonyms.items() if target in preds}

    def own(c: Clause) -> set[str] | None:
        said = (c.positive | c.negated | c.reduced) & (set(preds) | opposite)
        if not said:
            return None
        return {p for p in preds if p in c.positive} if not (c.positive & opposite) else set()

    n = len(s.clauses)
    for i, c in enumerate(s.clauses):
        if not all(o in c.positive for o in objects):
            continue
        verbs = own(c)
        if verbs is None:
            for j in list(range(i + 1, n)) + list(range(i - 1, -1, -1)):
                verbs = own(s.clauses[j])
                if verbs is not None:
                    break
        if verbs and set(preds) <= verbs:
            return True
    return False


# Signs that the reading may be wrong and what each costs; the threshold is the quiz rubric's,
# checked on the ``tune`` half of annotation_examples.json only.
PENALTIES = {"typo": 0.05, "hedge": 0.3, "forbidden_word": 0.4, "denied_and_said": 0.3, "unexplained": 0.2,
             "unbound_object": 0.4, "elsewhere_said": 0.4, "one_word": 0.4, "other_number": 0.4,
             "restates_key": 0.4, "keyword_list": 0.4, "converted_unit": 0.4, "framed": 0.4, "analogy": 0.4}
REVIEW_BELOW = 0.65


def judge(text: str, rule: Rule, catalogue: Catalogue) -> Judgement:
    """Judge one annotation against the rule for its field and value, with the reading's confidence."""
    j = _judge(text, rule, catalogue)
    if j.wrong:
        j.wrong_words = words_read_as(text, j.wrong, catalogue)
    if j.verdict != Verdict.MISSING:
        j.signs = _confidence_signs(text, rule, catalogue, j)
        j.confidence = round(max(0.0, 1.0 - sum(PENALTIES[s] for s in j.signs)), 2)
    return j


def words_read_as(text: str, facets: list[str], catalogue: Catalogue) -> dict[str, list[str]]:
    """For each facet, the words of the annotation (as the reading saw them) that named it: what
    "you are wrong about X" quotes."""
    out: dict[str, list[str]] = {}
    for _, word, kinds in catalogue.matcher.find(prepare(text, catalogue)):
        for f in facets:
            if f"facet:{f}" in kinds and word not in out.setdefault(f, []):
                out[f].append(word)
    return {f: w for f, w in out.items() if w}


def _confidence_signs(text: str, rule: Rule, catalogue: Catalogue, j: Judgement) -> list[str]:
    signs: list[str] = []
    norm = textmatch.normalise(text)
    signs += ["typo"] * min(textmatch.spell_fix(norm, _vocabulary(catalogue))[1], 2)
    if textmatch.hedged(norm):
        signs.append("hedge")
    if textmatch.framed(norm):
        signs.append("framed")  # "it is not true that ...": which words the frame denies is a guess
    if j.verdict != Verdict.CORRECT and textmatch.analogy(norm):
        signs.append("analogy")  # explained by an image the vocabulary cannot read: nothing found is no proof
    sentences = analyse(text, catalogue)
    positive = set().union(*(s.positive for s in sentences)) if sentences else set()
    negated = set().union(*(c.negated for s in sentences for c in s.clauses if not c.consequence)) if sentences else set()
    predicates = set(catalogue.raw.get("antonyms", {}).values())
    # the verb binding below only matters for rules about the training states that forbid a verb
    # ("shard parameters"); other rules' forbids are direct claims the reading need not guess at
    verbs = predicates | set(catalogue.raw.get("antonyms", {}))
    states = set(catalogue.groups.get("states", []))
    needed_states = set().union(*(_positive_facets(i) for i in rule.require)) & states if rule.require else set()
    binds = bool(needed_states) and any(set(bad) & verbs for bad in rule.forbid)
    if j.verdict in (Verdict.CORRECT, Verdict.PARTIAL) and binds:
        # a facet this value must not claim is there, and the reading decided it was not claimed
        needed = set().union(*(_positive_facets(i) for i in rule.require)) if rule.require else set()
        forbidden = {f for bad in rule.forbid for f in bad if f not in predicates} - needed
        for c in (c for s in sentences for c in s.clauses):
            if forbidden & c.positive and not ((c.positive | c.negated | c.reduced) & verbs):
                signs.append("forbidden_word")  # said without a verb of its own: the reading guessed
                break
        objects = set().union(*(catalogue.groups.get(g, []) for g in ("states",))) - predicates
        for c in (c for s in sentences for c in s.clauses):
            if c.positive & objects and not ((c.positive | c.negated | c.reduced) & verbs) and c.unread >= 2:
                signs.append("unbound_object")  # "参数每卡一份": said of the object, in words we do not know
                break
    shards = any(i in predicates for i in rule.require)  # a rule that asks what the stage shards
    if j.verdict != Verdict.CORRECT and binds and shards and "unbound_object" not in signs:
        for c in (c for s in sentences for c in s.clauses):
            if c.positive & states and not ((c.positive | c.negated | c.reduced) & verbs) and c.unread >= 2:
                # "每张卡只保存一部分优化器状态": the states said with a verb the vocabulary lacks; what
                # the note says of them is unread, so a fail would be a guess
                signs.append("unbound_object")
                break
    if j.verdict in (Verdict.CORRECT, Verdict.PARTIAL):
        if (negated & positive) - predicates:
            signs.append("denied_and_said")
        elsewhere, own = set(rule.elsewhere), set(rule.own)
        for s in sentences:
            kept = _drop_side_remarks(s, elsewhere, own)
            if kept.positive & elsewhere and kept.mentioned & own:
                signs.append("elsewhere_said")  # "fp16 = bfloat16": the other value said of this one
                break
        excused = {f for f, excuses in catalogue.raw.get("converted", {}).items() if set(excuses) & positive}
        if excused & positive and any(bad == [f] for bad in rule.forbid for f in excused):
            signs.append("converted_unit")  # the note converts the unit: the reading cannot check the arithmetic
        if _states_another_number(norm, rule.value):
            signs.append("other_number")  # "学习率 1e-3" for 1e-4, "timeout in milliseconds, about 50 hours"
        clauses = [c for s in sentences for c in s.clauses]
        if j.verdict == Verdict.CORRECT and len(set().union(*(c.words for c in clauses))) <= 1:
            # full marks on one known word ("machines", "分布式类型为 FSDP", "ds 配置"): it may only
            # restate the key. Counted in words as written, not facets: "clip the total gradient
            # norm" names its one facet twice and says more than the key does
            signs.append("one_word")
        elif j.verdict == Verdict.CORRECT and rule.key and _restates_key(text, rule, catalogue):
            signs.append("restates_key")
        if len(clauses) >= 3 and sum(1 for c in clauses if not (c.positive | c.negated | c.reduced)) * 2 > len(clauses):
            signs.append("unexplained")
        if (j.verdict == Verdict.CORRECT and len(clauses) >= 3 and not _NUMBER.search(_NUMBERED_NAME.sub(" ", norm))
                and all(len(c.words) == 1 and c.unread == 0 and not (c.negated | c.reduced) for c in clauses)):
            signs.append("keyword_list")  # "shard, optimizer states, gradients": words, no claim
    return signs


# a number standing on its own (not "ZeRO-3", "fp32", "bf16"), with an optional exponent and multiplier
_NUMBER = re.compile(r"(?<![a-z0-9_\-.])(\d+(?:\.\d+)?)(?:e([+-]?\d+))?\s*(million|billion|百万|[kmgb万亿千])?(?![a-z0-9])")
_MULTIPLIER = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9, "million": 1e6, "billion": 1e9, "千": 1e3, "万": 1e4,
               "百万": 1e6, "亿": 1e8}
_NUMBERED_NAME = re.compile(r"(?:rank|gpu|card|node|stage|zero|layer|block|step)\s*\d+")


def _states_another_number(norm: str, value: object) -> bool:
    """Does the (normalised) annotation of a rate, size or time state numbers, none of them its value
    ("5e8" and "500M" are 500000000)? Names with a number in them ("rank 0", "stage 3") are not
    numbers. The reading cannot tell a derived number from a wrong one, so a teacher looks."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, int) and abs(value) < 100:
        return False  # a small count (stage 3, 8 processes) sits among other counts: "ZeRO-3 over 8 GPUs"
    # read as floats: "1e999999999" is inf, never a ten-to-the-billion integer
    numbers = [float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else "")) * _MULTIPLIER.get(m.group(3) or "", 1)
               for m in _NUMBER.finditer(_NUMBERED_NAME.sub(" ", norm))]
    return bool(numbers) and not any(abs(n - value) <= 1e-9 * max(1.0, abs(value)) for n in numbers)


def _restates_key(text: str, rule: Rule, catalogue: Catalogue) -> bool:
    """Is every word the vocabulary reads in the annotation also in the field's key or value
    ("bucket size for allgather", "the max grad norm (1.0)")? Such a note says what the key says
    and nothing about what it does: a teacher gives half a point, the rule may give full marks."""
    def words(s: str) -> set[str]:
        return {w for _, w, _ in catalogue.matcher.find(prepare(s, catalogue))}

    said = words(text)
    return bool(said) and said <= words(f"{re.sub(r'[._]', ' ', rule.key)} {rule.value}")


def _drop_side_remarks(s: Sentence, elsewhere: set[str], own: set[str]) -> Sentence:
    """A later clause that names another value ("参数不切，那是 ZeRO-3", "unlike stage 3") is a
    side remark about that value: drop it. A sentence that *starts* with another value
    ("ZeRO-2: shards ...") stays whole and is set aside as a description of that value."""
    if not elsewhere:
        return s
    first = next((i for i, c in enumerate(s.clauses) if c.positive | c.negated | c.reduced), None)
    if first is None:
        return s
    head = s.clauses[first]
    if (head.positive | head.negated | head.reduced) & elsewhere:
        if not head.opens_contrast or first + 1 >= len(s.clauses):
            return s
        # "unlike stage 3, which also shards parameters, this stage ...": the opener and the
        # clauses describing the other value are set apart; the rest is about this value
        rest = first + 1
        while rest < len(s.clauses) and s.clauses[rest].relative:
            rest += 1
        return _drop_side_remarks(Sentence(s.clauses[rest:]), elsewhere, own) if rest < len(s.clauses) else Sentence([])
    kept = [c for c in s.clauses if not ((c.positive | c.negated | c.reduced) & elsewhere)
            or ((c.positive | c.negated | c.reduced) & own) or c.compares]
    return Sentence(kept)


def _judge(text: str, rule: Rule, catalogue: Catalogue) -> Judgement:
    if not text.strip():
        return Judgement(Verdict.MISSING, required=len(rule.require))
    sentences = analyse(text, catalogue)
    elsewhere, own = set(rule.elsewhere), set(rule.own)
    sentences = [_drop_side_remarks(s, elsewhere, own) for s in sentences]
    judged = [s for s in sentences if not (s.mentioned & elsewhere) or (s.mentioned & own)]
    aside = [s for s in sentences if s not in judged]
    if aside and not any(s.positive or s.negated for s in judged):
        said = sorted(set().union(*(s.mentioned for s in aside)) & elsewhere)
        return Judgement(Verdict.CONTRADICTION, required=len(rule.require), wrong=said,
                         missing=list(rule.require))
    positive = set().union(*(s.positive for s in judged)) if judged else set()
    negative = set().union(*(c.negated | c.reduced for s in judged for c in s.clauses)) if judged else set()
    negated = set().union(*(c.negated for s in judged for c in s.clauses if not c.consequence)) if judged else set()
    wrong: list[str] = []
    needed = set().union(*(_positive_facets(i) for i in rule.require)) if rule.require else set()
    if not any("~" in item for item in rule.require):  # a rule that expects a "no ..." lets negations be
        wrong += sorted((negated & needed) - positive)  # "does not shard parameters" for stage 3
    antonyms = catalogue.raw.get("antonyms", {})
    predicates = set(antonyms.values())
    hypothetical = set(rule.hypothetical)
    converted = {f for f, excuses in catalogue.raw.get("converted", {}).items() if set(excuses) & positive}
    for s in judged:
        if s.mentioned & hypothetical:
            continue  # "true would move them to the CPU": the other setting, not a claim about this one
        for bad in rule.forbid:
            if set(bad) & predicates:
                if _forbidden_claim(s, bad, predicates, antonyms):
                    wrong.append(bad[-1])
                continue
            if len(bad) == 1 and bad[0] in converted:
                continue  # "about 1 GB in fp16" beside "5e8 elements": a conversion (a sign routes it)
            denied = {antonyms[a] for c in s.clauses for a in c.positive if a in antonyms}
            claims = [c for c in s.clauses if not any(antonyms.get(a) in bad for a in c.positive)]
            if not (denied & set(bad)) and all(any(_claims(c, f) for c in claims) for f in bad):
                wrong.append(bad[-1].lstrip("~-"))
        for c in s.clauses:
            if not c.exclusive:
                continue
            for members in catalogue.groups.values():
                said = c.positive & set(members)
                if not said:
                    continue
                for item in rule.require:
                    wanted = [f for f in _ordered_facets(item) if f in members]
                    if wanted and not (set(wanted) & said):
                        wrong.append(wanted[0])
    for item in rule.require:  # "moves gradients to the CPU" for parameter offload: another member named instead
        wanted = _positive_facets(item)
        for members in map(set, catalogue.groups.values()):
            if wanted and wanted <= members and (positive & members) and not (positive & members & needed):
                wrong.append(_ordered_facets(item)[0])
    met = [i for i in rule.require if _item_met(i, positive, negative)]
    missing = [i for i in rule.require if i not in met]
    if wrong:
        return Judgement(Verdict.CONTRADICTION, len(met), len(rule.require), missing, sorted(set(wrong)))
    if not missing:
        return Judgement(Verdict.CORRECT, len(met), len(rule.require))
    signature = set(catalogue.concepts[rule.concept].get("signature", []))
    if met and (positive & signature or rule.require[0] in met):
        return Judgement(Verdict.PARTIAL, len(met), len(rule.require), missing)
    other = _other_concept(sentences, rule, catalogue)
    if other:
        return Judgement(Verdict.WRONG_CONCEPT, 0, len(rule.require), missing, other_concept=other)
    if met:
        return Judgement(Verdict.PARTIAL, len(met), len(rule.require), missing)
    return Judgement(Verdict.UNRELATED, 0, len(rule.require), missing)


def describe_item(item: str, catalogue: Catalogue, lang: str) -> str:
    """A requirement item in words: ``parameters|all_states`` -> "parameters / everything"."""
    sep = " / " if lang == "en" else "／"
    parts = []
    for alt in item.split("|"):
        words = []
        for f in alt.split("&"):
            neg = f.startswith("~")
            w = catalogue.facet_words(f.lstrip("~"), lang)[0]
            words.append((("no " if lang == "en" else "不") + w) if neg else w)
        parts.append(" + ".join(words))
    return sep.join(dict.fromkeys(parts))
