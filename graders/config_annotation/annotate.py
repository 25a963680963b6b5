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

from graders.config_annotation.catalogue import Catalogue, Rule

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

    @property
    def fraction(self) -> float:
        if self.verdict == Verdict.CORRECT:
            return 1.0
        if self.verdict == Verdict.PARTIAL and self.required:
            return self.satisfied / self.required
        return 0.0


def _split_sentences(text: str, catalogue: Catalogue) -> list[list[str]]:
    """Sentences as lists of clause strings (lowercased)."""
    text = re.sub(r"\s+", " ", text.lower()).strip()
    contrast = catalogue.raw.get("contrast", {})
    words = sorted({w.lower() for lang in ("en", "zh") for w in contrast.get(lang, [])}, key=len, reverse=True)
    pattern = "|".join(rf"(?<![a-z0-9_]){re.escape(w)}(?![a-z0-9_])" if w.isascii() else re.escape(w)
                       for w in words)
    if pattern:
        text = re.sub(pattern, lambda m: " \n" + m.group(0) + " ", text)
    out = []
    for sent in re.split(r"\n|[.;!?](?=\s|$)|[。；！？]", text):
        clauses = [c.strip() for c in SOFT_BREAK.split(sent) if c.strip()]
        if clauses:
            out.append(clauses)
    return out


def _analyse_clause(text: str, catalogue: Catalogue) -> Clause:
    tokens = catalogue.matcher.find(text)
    clause = Clause()
    facet_tokens = [(i, {k[6:] for k in kinds if k.startswith("facet:")}) for i, (_, _, kinds) in enumerate(tokens)]
    facet_tokens = [(i, f) for i, f in facet_tokens if f]
    negated_idx: set[int] = set()
    reduced_idx: set[int] = set()
    for i, (_, _, kinds) in enumerate(tokens):
        if "exclusive" in kinds and not any(k.startswith("facet:") for k in kinds):
            clause.exclusive = True
        for kind, target in (("negators", negated_idx), ("reducers", reduced_idx)):
            if kind in kinds and not any(k.startswith("facet:") for k in kinds) and "neutral" not in kinds:
                after = [j for j, _ in facet_tokens if j > i]
                target.update(after or [j for j, _ in facet_tokens if j < i])
    for j, facets in facet_tokens:
        if j in negated_idx:
            clause.negated |= facets
        elif j in reduced_idx:
            clause.reduced |= facets
        else:
            clause.positive |= facets
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


def judge(text: str, rule: Rule, catalogue: Catalogue) -> Judgement:
    """Judge one annotation against the rule for its field and value."""
    if not text.strip():
        return Judgement(Verdict.MISSING, required=len(rule.require))
    sentences = analyse(text, catalogue)
    elsewhere, own = set(rule.elsewhere), set(rule.own)
    judged = [s for s in sentences if not (s.mentioned & elsewhere) or (s.mentioned & own)]
    aside = [s for s in sentences if s not in judged]
    if aside and not any(s.positive or s.negated for s in judged):
        said = sorted(set().union(*(s.mentioned for s in aside)) & elsewhere)
        return Judgement(Verdict.CONTRADICTION, required=len(rule.require), wrong=said,
                         missing=list(rule.require))
    positive = set().union(*(s.positive for s in judged)) if judged else set()
    negative = set().union(*(c.negated | c.reduced for s in judged for c in s.clauses)) if judged else set()
    negated = set().union(*(c.negated for s in judged for c in s.clauses)) if judged else set()
    wrong: list[str] = []
    needed = set().union(*(_positive_facets(i) for i in rule.require)) if rule.require else set()
    if not any("~" in item for item in rule.require):  # a rule that expects a "no ..." lets negations be
        wrong += sorted((negated & needed) - positive)  # "does not shard parameters" for stage 3
    antonyms = catalogue.raw.get("antonyms", {})
    for s in judged:
        for bad in rule.forbid:
            denied = {antonyms[a] for c in s.clauses for a in c.positive if a in antonyms}
            claims = [c for c in s.clauses if not any(antonyms.get(a) in bad for a in c.positive)]
            if not (denied & set(bad)) and all(any(f in c.positive for c in claims) for f in bad):
                wrong.append(bad[-1])
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
