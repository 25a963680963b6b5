"""Short-text grading by a rubric of concepts bound to subjects, in Chinese or English, with
the confidence of its reading.

Keyword spotting would give full marks to "data parallel solves capacity, model parallel
solves throughput". Instead each rubric item says *which subject* a concept must be said of,
and with which polarity:

1. The answer is normalised (``textmatch.normalise``: full-width, case, "ZeRO 1/2/3" spelled
   out), phrases the question lists under ``ignore`` are blanked ("ZeRO 三级" is not stage 3),
   near-miss Latin words are corrected towards the rubric's vocabulary ("paramters"), and the
   text is cut into sentences and clauses (a colon does not cut: "Throughput: data parallelism").
2. A clause that names no subject continues the previous clause's subject within its sentence
   (or across a ";"), never across a full stop.
3. An item is met when its subject and its concept share a clause (or a sentence, for items
   with ``scope: sentence``) and the concept is not negated before or right after it.
   ``negation: ignore`` counts negated mentions too ("no DistributedSampler" names the
   suspect); ``negation: wrong`` makes a negated mention a wrong claim ("LoRA 也装不下").
4. An item whose subject is bound to one of its ``wrong`` concepts is *confused*: zero points
   and its ``confused`` message. Items without a subject are confused by a ``wrong`` phrase
   anywhere ("it is not the sampler", "each card gets disjoint data").
5. "A and B address X and Y respectively / 分别" pairs subjects and concepts by their order.
6. A very short answer with no subjects ("吞吐/容量") is read in the question's order.
7. ``role: give | get`` items follow the direction of a trade ("trades A for B", "用 A 换 B"):
   the gained thing stated as given *and* the cost stated as gained is a reversed trade.

The reading also has a *confidence* (1.0 = nothing unusual). Each sign that the reading may
be wrong lowers it: hedging, a concept said in a clause that names no subject, a wrong claim
beside a met item in one sentence, a one-sided reversed trade, a long answer the rubric finds
nothing in, and so on (``PENALTIES``). Below ``REVIEW_BELOW`` the answer waits for a teacher.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from coursework.quiz import textmatch as tm
from coursework.quiz.result import FormatError, Text

MAX_TEXT_CHARS = 2000
SHORTHAND_MAX_CHARS = 60
_RESPECTIVELY = re.compile(r"respectively|分别|各自|依次")

# How much each sign of a doubtful reading lowers the confidence. The threshold below was
# chosen on the ``tune`` half of the answer sets only (python -m coursework.quiz.agreement):
# the lowest review share at which every auto-graded tuning answer got the fair verdict.
PENALTIES = {
    "typo": 0.05,  # per corrected word (at most two counted)
    "shorthand": 0.1,  # read in the question's order, without subjects
    "hedge": 0.3,  # "maybe", "可能", a question mark
    "unbound": 0.35,  # a missing item's concept said in a clause that names no subject
    "mixed": 0.4,  # a wrong claim and a met item in one sentence, one of them without a subject
    "negated_evidence": 0.15,  # a missing item's concept is there, negated
    "one_sided_trade": 0.35,  # the gain stated as given (or the cost as gained), not both
    "wrong_beside_full": 0.25,  # full marks, yet a wrong phrase is in the answer (negated)
    "long_unread": 0.4,  # 40+ characters and nothing of the rubric found
    "unexplained": 0.2,  # most clauses of a longer answer carry nothing the rubric knows
    "crowded": 0.4,  # one clause names two subjects and all of them were read as mixed up ("DP MP throughput capacity")
    "framed": 0.4,  # "it is not true that ...": which words the frame denies is a guess
    "stuffed": 0.4,  # a wrong claim beside a clause holding three or more items' words (a list of the right words)
}
REVIEW_BELOW = 0.65


@dataclass
class RubricItem:
    """One required concept, optionally bound to a subject."""

    id: str
    concept: list[str]
    points: float = 1.0
    subject: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    scope: str = "clause"  # clause | sentence
    order: int | None = None  # position in a shorthand answer ("吞吐/容量")
    negation: str = "absent"  # absent: a negated concept does not count; ignore: it does; wrong: it is a wrong claim
    role: str | None = None  # give | get: the side of a trade this concept belongs on
    missing: Text = field(default_factory=dict)
    confused: Text = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RubricItem":
        return cls(**d)

    def __post_init__(self) -> None:
        self.concept_terms = [tm.term(t) for t in self.concept]
        self.subject_terms = [tm.term(t) for t in self.subject]
        self.wrong_terms = [tm.term(t) for t in self.wrong]


@dataclass
class Rubric:
    items: list[RubricItem]
    ignore: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        words = [w for it in self.items for w in it.concept + it.subject + it.wrong]
        self.vocab = tm.vocabulary(words)
        self.ignore_norm = sorted((tm.normalise(p) for p in self.ignore), key=len, reverse=True)
        self.all_terms = [t for it in self.items for t in it.concept_terms + it.subject_terms + it.wrong_terms]


_COMPILED: dict[int, tuple[Any, Rubric]] = {}
_MEMO_LOCAL = threading.local()  # .memo: the hits found so far in one evaluate() (same term list, same clause)
_MEMO_LOCAL.memo = None


def compile_rubric(spec: dict[str, Any] | list[RubricItem]) -> Rubric:
    """The rubric of a question's ``info["rubric"]`` (compiled once per loaded dict)."""
    if isinstance(spec, list):
        return Rubric(spec)
    hit = _COMPILED.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    rub = Rubric([RubricItem.from_dict(d) for d in spec["items"]], list(spec.get("ignore", [])))
    if len(_COMPILED) > 1024:
        _COMPILED.clear()
    _COMPILED[id(spec)] = (spec, rub)
    return rub


def normalise(text: str) -> str:
    return tm.normalise(text)


def validate_text(raw: str) -> str:
    """Reject empty, oversized or letter-free answers before grading."""
    text = (raw or "").strip()
    if not text:
        raise FormatError({"zh": "请写下你的答案。", "en": "Please write an answer."}, "empty")
    if len(text) > MAX_TEXT_CHARS:
        raise FormatError({"zh": f"答案过长（上限 {MAX_TEXT_CHARS} 字符），请简要作答。",
                           "en": f"Answer too long (limit {MAX_TEXT_CHARS} characters); keep it short."}, "too_long")
    if not re.search(r"[a-zA-Z\u4e00-\u9fff]", text):
        raise FormatError({"zh": "答案里没有文字。", "en": "The answer contains no words."}, "no_words")
    return text


@dataclass
class _Seg:
    sentence: int
    text: str
    subjects: set[str]
    trade: list[tuple[int, int, str]]




_ANY: dict[int, tuple[list[tm.Term], re.Pattern[str]]] = {}


def _any_of(terms: list[tm.Term]) -> re.Pattern[str]:
    """One pattern that finds the first part of any of ``terms``: most clauses hold none of them."""
    hit = _ANY.get(id(terms))
    if hit is None or hit[0] is not terms:
        if len(_ANY) > 4096:
            _ANY.clear()
        pattern = re.compile("|".join(t.parts[0].pattern for t in terms if t.parts) or r"(?!x)x")
        hit = _ANY[id(terms)] = (terms, pattern)
    return hit[1]


def _knows_any(terms: list[tm.Term], text: str) -> bool:
    """Whether the first part of any of ``terms`` occurs in ``text`` (what ``_any_of`` finds)."""
    return any(t.first_word in text and t.parts and t.parts[0].search(text) for t in terms)


def _hits(terms: list[tm.Term], text: str, post: bool = True) -> list[tm.Hit]:
    memo = getattr(_MEMO_LOCAL, "memo", None)
    key = (id(terms), text, post)
    if memo is not None:
        hit = memo.get(key)
        if hit is not None:
            return hit
    # Only terms whose first word is in the text can match (``Term.first_word``); the others
    # have no hits, so the result is the same as trying every term. One term is often in several
    # lists (a subject of one item, a wrong phrase of another): its hits are read once per text.
    out: list[tm.Hit] = []
    for t in terms:
        if t.parts and t.first_word in text:
            if memo is None:
                out += tm.hits(t, text, post)
                continue
            found = memo.get((t, text, post))
            if found is None:
                found = memo[(t, text, post)] = tm.hits(t, text, post)
            out += found
    if memo is not None:
        memo[key] = out
    return out


def _first_positive(terms: list[tm.Term], text: str) -> int | None:
    pos = [h.start for h in _hits(terms, text) if not h.negated]
    return min(pos) if pos else None


def prepare(raw: str, rubric: Rubric) -> tuple[str, int]:
    """The answer as the rubric reads it (normalised, ignored phrases blanked, typos fixed)."""
    text = tm.normalise(validate_text(raw))
    for phrase in rubric.ignore_norm:
        text = text.replace(phrase, " ")
    return tm.spell_fix(text, rubric.vocab)


def _segments(text: str, items: list[RubricItem]) -> tuple[list[_Seg], list[str]]:
    segs: list[_Seg] = []
    sentences = []
    previous: set[str] = set()
    trades = any(it.role for it in items)  # a trade's direction is read only for items with a role
    for si, (clauses, after_semicolon) in enumerate(tm.split_marked(text)):
        sentences.append(" , ".join(clauses))
        if not after_semicolon:
            previous = set()
        for clause in clauses:
            named = {it.id for it in items if it.subject and _hits(it.subject_terms, clause, post=False)}
            subjects = named or previous
            segs.append(_Seg(si, clause, subjects, tm.trade_spans(clause) if trades else []))
            previous = subjects
    return segs, sentences


def evaluate(raw: str, items: list[RubricItem] | Rubric) -> dict[str, Any]:
    """Which items are met, missing or confused, and how sure the reading is.

    Raises FormatError for unreadable input.
    """
    rubric = items if isinstance(items, Rubric) else Rubric(list(items))
    _MEMO_LOCAL.memo = {}
    try:
        return _evaluate(raw, rubric)
    finally:
        _MEMO_LOCAL.memo = None


def _evaluate(raw: str, rubric: Rubric) -> dict[str, Any]:
    items = rubric.items
    text, typos = prepare(raw, rubric)
    segs, sentences = _segments(text, items)
    respectively = {i for i, s in enumerate(sentences) if _RESPECTIVELY.search(s)}
    met: set[str] = set()
    confused: set[str] = set()
    met_in: dict[str, set[int]] = {}
    confused_in: dict[str, set[int]] = {}
    signs: list[str] = []
    reversed_roles: set[str] = set()
    read_as: dict[str, list[str]] = {}  # confused item -> the words read as its wrong claim
    by_id = {it.id: it for it in items}
    for it in items:
        for seg in segs:
            if seg.sentence in respectively and it.subject:
                continue  # paired by order in _pair_respectively
            bound = (it.id in seg.subjects) if it.subject else True
            concept_hits = _hits(it.concept_terms, seg.text)
            if bound:
                good = [h for h in concept_hits if it.negation == "ignore" or not h.negated]
                if good:
                    met.add(it.id)
                    met_in.setdefault(it.id, set()).add(seg.sentence)
                bad = [h for h in _hits(it.wrong_terms, seg.text) if not h.negated]
                if it.negation == "wrong":
                    bad += [h for h in concept_hits if h.negated]
                if bad:
                    confused.add(it.id)
                    confused_in.setdefault(it.id, set()).add(seg.sentence)
                    words = read_as.setdefault(it.id, [])
                    words += [seg.text[h.start:h.end].strip() for h in bad if seg.text[h.start:h.end].strip() not in words]
                if it.role:
                    for h in good:
                        for start, end, role in seg.trade:
                            if start <= h.start < end and role != it.role:
                                reversed_roles.add(it.id)
            if it.subject and it.scope == "sentence" and it.id not in met:
                joined = sentences[seg.sentence]
                if _hits(it.subject_terms, joined, post=False) and _first_positive(it.concept_terms, joined) is not None:
                    met.add(it.id)
                    met_in.setdefault(it.id, set()).add(seg.sentence)
    _pair_respectively(sentences, respectively, items, met, confused, signs)
    for si in respectively:  # "A and B solve X and Y respectively" read the wrong way round: quote the sentence
        for iid in confused - set(read_as):
            read_as[iid] = [sentences[si].replace(" , ", ", ").strip()]
    _read_shorthand(text, items, met, confused, signs)
    gets = {i for i in reversed_roles if by_id[i].role == "get"}
    gives = {i for i in reversed_roles if by_id[i].role == "give"}
    if gets and gives:
        confused |= gets | gives  # "trades GPU memory for speed": both sides the wrong way round
    elif reversed_roles:
        signs.append("one_sided_trade")
    met -= confused
    missing = [it.id for it in items if it.id not in met and it.id not in confused]
    _confidence_signs(raw, text, typos, segs, items, met, confused, missing, met_in, confused_in, signs,
                      rubric.all_terms)
    penalty = sum(PENALTIES[s] for s in signs)
    confidence = round(max(0.0, 1.0 - penalty), 2)
    return {"met": sorted(met), "confused": sorted(confused), "missing": missing,
            "confidence": confidence, "signs": sorted(set(signs)), "needs_review": confidence < REVIEW_BELOW,
            "read_as": {k: v[:3] for k, v in read_as.items() if k in confused}}


def _confidence_signs(raw: str, text: str, typos: int, segs: list[_Seg], items: list[RubricItem], met: set[str],
                      confused: set[str], missing: list[str], met_in: dict[str, set[int]],
                      confused_in: dict[str, set[int]], signs: list[str], all_terms: list[tm.Term]) -> None:
    signs += ["typo"] * min(typos, 2)
    if tm.hedged(text):
        signs.append("hedge")
    if tm.framed(text):
        signs.append("framed")
    by_id = {it.id: it for it in items}
    if confused and any(sum(1 for it in items if _hits(it.concept_terms, seg.text)) >= 3 for seg in segs):
        signs.append("stuffed")  # the right words listed after a wrong mapping may only be credited by chance
    for iid in missing:
        it = by_id[iid]
        for seg in segs:
            hs = _hits(it.concept_terms, seg.text)
            if it.subject and not seg.subjects and any(not h.negated for h in hs):
                signs.append("unbound")
                break
            if any(h.negated for h in hs) and it.negation == "absent":
                signs.append("negated_evidence")
                break
    for cid in confused:
        for mid in met:
            if (not by_id[cid].subject or not by_id[mid].subject) and confused_in.get(cid, set()) & met_in.get(mid, set()):
                signs.append("mixed")
                break
        else:
            continue
        break
    named = [{i for i in seg.subjects if by_id[i].subject and _hits(by_id[i].subject_terms, seg.text, post=False)}
             for seg in segs]
    crowded = [n for n in named if len(n) >= 2 and n <= confused]  # every subject of the clause mixed up
    if crowded:
        signs.append("crowded")
    if not missing and not confused:
        for it in items:
            if any(h.negated for seg in segs for h in _hits(it.wrong_terms, seg.text)) and it.negation != "ignore":
                signs.append("wrong_beside_full")
                break
    if not met and not confused and len(raw.strip()) >= 40:
        signs.append("long_unread")
    elif len(segs) >= 3:
        empty = sum(1 for seg in segs if not _knows_any(all_terms, seg.text))
        if empty * 2 > len(segs):
            signs.append("unexplained")


def _pair_respectively(sentences: list[str], which: set[int], items: list[RubricItem], met: set[str],
                       confused: set[str], signs: list[str]) -> None:
    """"A and B solve X and Y respectively": pair subjects and concepts by their order."""
    for si in which:
        joined = sentences[si]
        found = []
        for it in items:
            if not it.subject:
                continue
            s = [h.start for h in _hits(it.subject_terms, joined, post=False)]
            c = _first_positive(it.concept_terms, joined)
            if s and c is not None:
                found.append((min(s), c, it.id))
        if len(found) < 2:
            if found:
                signs.append("unbound")
            continue
        by_subject = [i for _, _, i in sorted(found)]
        by_concept = [i for _, _, i in sorted(found, key=lambda t: t[1])]
        if by_subject == by_concept:
            met.update(by_subject)
        else:
            confused.update(by_subject)
            met.difference_update(by_subject)


def _read_shorthand(text: str, items: list[RubricItem], met: set[str], confused: set[str], signs: list[str]) -> None:
    """A short answer that lists the concepts in the question's order ("吞吐/容量")."""
    ordered = sorted((it for it in items if it.order is not None), key=lambda it: it.order or 0)
    if len(ordered) < 2 or len(text) > SHORTHAND_MAX_CHARS or confused:
        return
    if any(it.id in met for it in ordered):
        return  # the answer already binds subjects; do not read it a second way
    if sum(1 for it in ordered if it.subject and _hits(it.subject_terms, text, post=False)) >= 2:
        return  # "throughput, capacity, data parallelism, model parallelism": the subjects listed, none bound
    positions = [_first_positive(it.concept_terms, text) for it in ordered]
    if all(p is not None for p in positions) and positions == sorted(positions):
        met.update(it.id for it in ordered)
        signs.append("shorthand")


_GENERIC_CONFUSED = {"zh": "有一处说法与事实相反，请对照讲解再看一遍。", "en": "One statement contradicts the facts; compare it with the explanation."}
_GENERIC_MISSING = {"zh": "还缺少一个要点，请对照讲解。", "en": "A point is missing; compare with the explanation."}


def _quoting(message: Text, words: list[str]) -> Text:
    """A "you mixed this up" message with the words it read as the mix-up (as the reading saw them:
    normalised), so the student can see what was taken for the wrong claim."""
    if not words:
        return message
    zh, en = "、".join(f"“{w}”" for w in words), ", ".join(f"“{w}”" for w in words)
    return {"zh": f"{message.get('zh', '')}（读到的说法：{zh}）", "en": f"{message.get('en', '')} (read in your words: {en})"}


def grade_text(raw: str, items: list[RubricItem] | Rubric) -> tuple[float, list[Text], dict[str, Any]]:
    """Fraction of rubric points earned, feedback naming what is missing or mixed up, details."""
    rubric = items if isinstance(items, Rubric) else Rubric(list(items))
    outcome = evaluate(raw, rubric)
    total = sum(it.points for it in rubric.items) or 1.0
    earned = sum(it.points for it in rubric.items if it.id in outcome["met"])
    feedback: list[Text] = []
    for it in rubric.items:
        if it.id in outcome["confused"]:
            feedback.append(_quoting(it.confused or _GENERIC_CONFUSED, outcome["read_as"].get(it.id, [])))
        elif it.id in outcome["missing"]:
            feedback.append(it.missing or _GENERIC_MISSING)
    return earned / total, feedback, outcome


def warm(rubrics: list[Rubric]) -> None:
    """Compile every pattern the rubrics use (terms, per-list pre-filters) once, up front: a
    process then grades its first free-text answers as fast as its later ones."""
    for rub in rubrics:
        for it in rub.items:
            for terms in (it.concept_terms, it.subject_terms, it.wrong_terms):
                _any_of(terms)
        _any_of(rub.all_terms)
        try:
            evaluate("warm up: a, b; c. 不是 d", rub)
        except FormatError:
            pass
