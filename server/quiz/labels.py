"""Teachers' decisions on free-text answers as labelled examples, and the trust readers earn from
them (the rule: ``coursework.trust``).

Every decision on an answer (a quiz group, an "ask the teacher", homework 2's annotation groups,
a confirmed sample) calls ``record`` for each answer it decided, with what each reader had
suggested for it. Labels belong to the question (``item``), not to a course, so next term's
course starts with this term's labels and the trust they earned.

``trusted_readers(item)`` is what grading asks on every free-text answer, so it is cached per
process: the whole (reader, item) -> earned table is read in one grouped pass and kept for
``CACHE_S`` seconds; a decision in this process drops it at once. Another web process sees a
new decision within ``CACHE_S`` (a verdict counted a few seconds "late" is still provisional,
never wrongly counted: trust only ever grows with agreeing labels and the cache can only be
behind, except where a full-marks-to-zero label withdraws it; that label's own answers are
decided by the teacher anyway).
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
from typing import Any, Iterable

from sqlalchemy import select

from coursework import trust
from coursework.quiz import textmatch
from server.extensions import db
from server.models import utcnow
from server.quiz.models import ReaderLabel

CACHE_S = 30.0
LABEL_TEXT_CHARS = 4000  # what a label keeps of its answer's text
ANNOTATION_ITEM = "annotation:"
_cache: dict[str, tuple[float, Any]] = {}  # database URL -> (when read, table): one per database
_lock = threading.Lock()


def normalised(text: str) -> str:
    """The answer as labels compare it: NFKC, case, punctuation and spaces dropped."""
    return re.sub(r"[\s\W_]+", "", textmatch.normalise(text or ""), flags=re.UNICODE)


# what the label hash drops but an answer's claim can hang on: operators (= ≠ < > + × ÷ ^ ...), a
# decimal point or a hyphen; ``same_claim`` drops only spaces and these sentence marks
_SENTENCE_MARKS = re.compile(r"[\s,.;:!?\"'`()\[\]{}，。；：！？、“”‘’（）【】「」《》…]+")
_NUMBER_MARK = re.compile(r"(?<=\d)[.,](?=\d)")


def same_claim(text: str) -> str:
    """The answer as text reuse compares it: ``normalised`` but keeping every mark that can change
    what it says ("full_shard ≠ ZeRO-3" is not "full_shard = ZeRO-3", nor "1.5 GB" "15 GB")."""
    t = _NUMBER_MARK.sub("#", textmatch.normalise(text or ""))
    return _SENTENCE_MARKS.sub("", t)


def answer_hash(item: str, text: str) -> str:
    return hashlib.sha256(f"{item}\n{normalised(text)}".encode("utf-8")).hexdigest()


def annotation_item(dialect: str, path: str) -> str:
    """The item a homework 2 note is labelled under: its dialect and field (values share it)."""
    return f"{ANNOTATION_ITEM}{dialect}:{path}"[:200]


def record(item: str, answer_text: str, decided: float, readings: dict[str, float | None], how: str,
           course_id: int | None, teacher_id: int | None, detail: str = "") -> None:
    """Keep one decided answer as a label (the caller commits). The same answer text decided again
    for the same item replaces its label, text included: agreement counts distinct answers, not
    clicks, and text reuse compares with the text last decided."""
    h = answer_hash(item, answer_text)
    row = db.session.scalar(select(ReaderLabel).where(ReaderLabel.item == item, ReaderLabel.answer_hash == h))
    clean = {str(k): (None if v is None else round(float(v), 4)) for k, v in (readings or {}).items()}
    if row is None:
        db.session.add(ReaderLabel(item=item[:200], answer_hash=h, answer_text=answer_text[:LABEL_TEXT_CHARS],
                                   detail=detail[:200],
                                   decided=round(decided, 4), readings=clean, how=how, course_id=course_id,
                                   decided_by=teacher_id, decided_at=utcnow()))
    else:
        row.decided, row.readings, row.how = round(decided, 4), clean, how
        row.answer_text = answer_text[:LABEL_TEXT_CHARS]  # the text this decision is about (``known_decision``)
        row.course_id, row.decided_by, row.decided_at, row.detail = course_id, teacher_id, utcnow(), detail[:200]
    forget()


def forget() -> None:
    """Drop this process's cached trust table (after a decision)."""
    with _lock:
        _cache.clear()


def _table() -> dict[tuple[str, str], trust.Agreement]:
    """(reader, item) -> agreement over all its labels (what the dashboard shows)."""
    return _tables()[0]


def _tables() -> tuple[dict[tuple[str, str], trust.Agreement], dict[tuple[str, str, str], trust.Agreement]]:
    """The all-labels table and the per-kind one ((reader, item, kind) -> agreement), read together."""
    where = str(db.engine.url)
    with _lock:
        hit = _cache.get(where)
        if hit is not None and time.monotonic() - hit[0] < CACHE_S:
            return hit[1]
    pairs: dict[tuple[str, str], list[tuple[float | None, float]]] = {}
    for item, decided, readings in db.session.execute(select(ReaderLabel.item, ReaderLabel.decided,
                                                             ReaderLabel.readings)):
        for reader, value in (readings or {}).items():
            pairs.setdefault((reader, item), []).append((value, decided))
    table = {k: trust.tally(k[0], k[1], v) for k, v in pairs.items()}
    kinds = {(r, i, k): a for (r, i), v in pairs.items() for k, a in trust.tally_kinds(r, i, v).items()}
    with _lock:
        if len(_cache) > 16:
            _cache.clear()
        _cache[where] = (time.monotonic(), (table, kinds))
    return table, kinds


def agreement_table(prefix: str | None = None) -> list[trust.Agreement]:
    """Every (reader, item) with labels, by item then reader; ``prefix`` keeps items starting with it."""
    rows = [a for (r, i), a in _table().items() if prefix is None or i.startswith(prefix)]
    return sorted(rows, key=lambda a: (a.item, a.reader))


def trusted_readers(item: str, kind: str | None = None) -> set[str]:
    """The readers whose verdicts of ``kind`` (``coursework.trust.KINDS``) on ``item`` count without
    a teacher (may be empty); ``kind`` None: the readers trusted over all their labels (the
    dashboard's summary; grading always asks for a kind)."""
    if kind is None:
        return {r for (r, i), a in _table().items() if i == item and a.earned()}
    return {r for (r, i, k), a in _tables()[1].items() if i == item and k == kind and a.earned()}


def kind_table(prefix: str | None = None) -> list[trust.Agreement]:
    """Every (reader, item, kind) agreement; ``prefix`` keeps items starting with it."""
    rows = [a for (r, i, k), a in _tables()[1].items() if prefix is None or i.startswith(prefix)]
    return sorted(rows, key=lambda a: (a.item, a.reader, trust.KINDS.index(a.kind or trust.FULL)))


def known_decision(item: str, answer_text: str) -> float | None:
    """The share a teacher already gave this very answer for this item, if any: an answer decided
    last term is decided again the same way without asking. The label is found by its hash
    (``normalised``) and reused only when the decided text makes the same claim (``same_claim``):
    a twin that differs by an operator or a decimal point was decided as another answer, and
    inheriting its share would count a verdict no teacher gave (a right answer below its share).
    An answer longer than a label keeps is compared on what the label kept, so it is not reused."""
    row = db.session.execute(select(ReaderLabel.decided, ReaderLabel.answer_text).where(
        ReaderLabel.item == item, ReaderLabel.answer_hash == answer_hash(item, answer_text))).first()
    if row is None or len(answer_text) > LABEL_TEXT_CHARS or same_claim(row.answer_text) != same_claim(answer_text):
        return None
    return row.decided


def disagreements(item: str, reader: str) -> list[ReaderLabel]:
    """The labels of ``item`` where ``reader`` suggested something else than the teacher gave."""
    rows = db.session.scalars(select(ReaderLabel).where(ReaderLabel.item == item).order_by(ReaderLabel.id.desc()))
    return [r for r in rows if reader in (r.readings or {})
            and not trust.agrees((r.readings or {}).get(reader), r.decided)]


def readings_of(details: dict[str, Any] | None, fallback: float | None = None) -> dict[str, float | None]:
    """What each reader suggested for a stored answer (``details["readings"]``); answers stored
    before readers were recorded have the rule reader's share only."""
    got = (details or {}).get("readings")
    if isinstance(got, dict):
        return {str(k): (None if v is None else float(v)) for k, v in got.items()}
    return {trust.RULE_READER: fallback}


def items_with_labels(items: Iterable[str]) -> dict[str, int]:
    """How many labels each of ``items`` has (the dashboard's "decided so far")."""
    wanted = set(items)
    out: dict[str, int] = {}
    for (r, i), a in _table().items():
        if i in wanted:
            out[i] = max(out.get(i, 0), a.decided + a.no_reading)
    return out
