"""Class statistics: per quiz question (facility, discrimination, common wrong answers) and per
homework check id (how many students' counted submissions fail it), plus the class-wide
measurements (speed-ups, per-rank peak memory) the charts draw.

"Counted" follows the homework's policy, like the gradebook: with "best" each student's
best graded submission, with "last" their last one; the score distribution is the
gradebook's own cells (late penalty, manual cells and overrides included), so the two pages
never disagree about a student.

Facility is the mean fraction of the points earned. Discrimination is the upper-lower index:
the facility among the best 27 % of attempts minus that among the weakest 27 % (by attempt
total); a question everyone gets right, or that strong students miss, shows a low value.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func

from coursework.quiz.bank import BankError, load_question
from coursework.text import pick
from server.scores.hand_scores import added_points_table, counted_score
from server.extensions import db
from server.models import Course, CourseAssignment, Submission, SubmissionStatus
from server.quiz.models import AttemptStatus, QuizAnswer, QuizAttempt
from server.scores.gradebook import build_gradebook

FAILING = ("fail", "error", "warn")


@dataclass
class QuestionStats:
    question_id: str
    title: dict[str, str]
    qtype: str
    answers: int = 0
    mean_score: float = 0.0
    facility: float = 0.0
    discrimination: float | None = None
    wrong: list[tuple[str, int]] = field(default_factory=list)  # (label, count), most common first
    missing: list[tuple[str, int]] = field(default_factory=list)  # rubric items missing (text questions)


def _option_labels(question_id: str, lang: str) -> dict[str, str]:
    try:
        info = load_question(question_id).info
    except BankError:
        return {}
    labels = {o["id"]: pick(o.get("text"), lang) or o["id"] for o in (info.get("options") or []) + (info.get("items") or [])}
    for m in (info.get("numeric") or {}).get("mistakes") or []:  # a named mistake reads as what it means
        if isinstance(m, dict) and m.get("id"):
            # its own label, else its feedback with the variant's numbers (which differ per answer) elided
            text = pick(m.get("label"), lang) or _PLACEHOLDER.sub("…", pick(m.get("feedback"), lang) or "")
            labels[f"mistake:{m['id']}"] = (text or m["id"])[:80]
    for item in (info.get("rubric") or {}).get("items") or []:  # a rubric concept reads as what it asks for
        if isinstance(item, dict) and item.get("id"):
            labels[f"concept:{item['id']}"] = (pick(item.get("missing"), lang) or item["id"])[:80]
            labels[f"reversed:{item['id']}"] = (pick(item.get("confused"), lang) or item["id"])[:80]
    return labels


_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _wrong_label(qtype: str, raw: str, details: dict[str, Any], labels: dict[str, str]) -> str:
    """How one wrong answer is counted: the chosen options, a named mistake, or the raw text."""
    if qtype in ("single", "multiple", "ordering") and details.get("chosen") is not None:
        chosen = details["chosen"]
        chosen = chosen if isinstance(chosen, list) else [chosen]
        sep = " → " if qtype == "ordering" else " + "
        return sep.join(labels.get(c, str(c)) for c in chosen) or "∅"
    if details.get("unit_confusion"):
        return "GB ↔ GiB"
    if details.get("mistake"):
        return labels.get(f"mistake:{details['mistake']}", str(details["mistake"]))
    return " ".join(raw.split())[:80] or "∅"


def quiz_question_stats(course_id: int, quiz_id: str, question_ids: list[str], lang: str) -> list[QuestionStats]:
    """Statistics for each question of a quiz over the course's finished attempts."""
    attempts = dict(db.session.execute(
        db.select(QuizAttempt.id, QuizAttempt.score / func.nullif(QuizAttempt.max_score, 0))
        .where(QuizAttempt.course_id == course_id, QuizAttempt.quiz_id == quiz_id,
               QuizAttempt.status != AttemptStatus.OPEN.value)).all())
    ranked = sorted(attempts, key=lambda a: attempts[a] or 0.0)
    k = max(1, round(len(ranked) * 0.27)) if len(ranked) >= 4 else 0
    lower, upper = set(ranked[:k]), set(ranked[-k:]) if k else set()
    answers = db.session.execute(
        db.select(QuizAnswer.attempt_id, QuizAnswer.question_id, QuizAnswer.score, QuizAnswer.max_score,
                  QuizAnswer.correct, QuizAnswer.raw_answer, QuizAnswer.details_json)
        .where(QuizAnswer.attempt_id.in_(db.select(QuizAttempt.id).where(
            QuizAttempt.course_id == course_id, QuizAttempt.quiz_id == quiz_id,
            QuizAttempt.status != AttemptStatus.OPEN.value)))).all()
    by_q: dict[str, list] = defaultdict(list)
    for row in answers:
        by_q[row.question_id].append(row)
    out = []
    for qid in list(question_ids) + sorted(set(by_q) - set(question_ids)):
        try:
            q = load_question(qid)
            title, qtype = q.info.get("title") or {"zh": qid, "en": qid}, q.type
        except BankError:
            title, qtype = {"zh": qid, "en": qid}, "?"
        rows = by_q.get(qid, [])
        st = QuestionStats(qid, title, qtype, answers=len(rows))
        if rows:
            # one source for both: the score that counts (a teacher's decision changes the score, not
            # the reading's stored fraction), as a share of the answer's points
            share = {id(r): (r.score / r.max_score if r.max_score else 0.0) for r in rows}
            st.mean_score = round(sum(r.score for r in rows) / len(rows), 3)
            st.facility = round(sum(share.values()) / len(rows), 3)
            up = [share[id(r)] for r in rows if r.attempt_id in upper]
            lo = [share[id(r)] for r in rows if r.attempt_id in lower]
            if up and lo:
                st.discrimination = round(sum(up) / len(up) - sum(lo) / len(lo), 3)
            labels = _option_labels(qid, lang)
            wrong = Counter(_wrong_label(qtype, r.raw_answer, r.details_json or {}, labels)
                            for r in rows if not r.correct)
            st.wrong = wrong.most_common(5)
            missing = Counter(m for r in rows if not r.correct for m in (r.details_json or {}).get("missing", []))
            confused = Counter(m for r in rows if not r.correct for m in (r.details_json or {}).get("confused", []))
            st.missing = ([(labels.get(f"concept:{m}", m), n) for m, n in missing.most_common(5)]
                          + [(labels.get(f"reversed:{c}", f"≠ {c}"), n) for c, n in confused.most_common(3)])
        out.append(st)
    return out


@dataclass
class CheckStats:
    check_id: str
    title: dict[str, str]
    students: int = 0  # latest submissions that ran this check
    failing: list[int] = field(default_factory=list)  # latest submission ids that fail/warn/error it
    failing_all: int = 0  # over every graded submission
    ran_all: int = 0

    @property
    def share(self) -> float:
        return len(self.failing) / self.students if self.students else 0.0


@dataclass
class HomeworkStats:
    checks: list[CheckStats]
    latest: int  # students with a graded submission
    submissions: int
    scores: list[float]  # fraction of the maximum that counts per student (the gradebook's cells)
    speedups: list[float]
    rank_peaks: dict[str, list[float]]  # "rank0" -> peak bytes per student
    policy: str = "best"  # which submission per student the per-check counts use


def counted_ids(rows: list[tuple[int, int, float | None]], policy: str) -> set[int]:
    """From ``(submission id, user id, score)`` of graded submissions: each student's counted one.

    ``best``: the highest score (the later one on a tie); ``last``: the latest.
    """
    pick: dict[int, tuple[float, int]] = {}
    for sid, uid, score in rows:
        key = (sid, sid) if policy == "last" else ((score or 0.0), sid)
        if uid not in pick or key > pick[uid]:
            pick[uid] = key
    return {k[1] for k in pick.values()}


def _class_fractions(course_id: int, assignment_id: str) -> list[float]:
    book = build_gradebook(db.session.get(Course, course_id))
    item = book.item(f"hw:{assignment_id}")
    if item is None or not item.max_score:
        return []
    return [r.cells[item.key].score / item.max_score for r in book.rows  # a held cell's 0 is not a result yet
            if item.key in r.cells and r.cells[item.key].score is not None and not r.cells[item.key].review]


def homework_stats(course_id: int, assignment_id: str) -> HomeworkStats:
    """Per check id, over each student's counted graded submission (the policy's) and over all of them."""
    graded = (Submission.course_id == course_id) & (Submission.assignment_id == assignment_id) & \
             (Submission.status == SubmissionStatus.GRADED.value)
    policy = db.session.scalar(db.select(CourseAssignment.score_policy).where(
        CourseAssignment.course_id == course_id, CourseAssignment.assignment_id == assignment_id)) or "best"
    added = added_points_table()  # 'best' by the score with hand-given points, as the gradebook picks
    latest_ids = counted_ids(db.session.execute(
        db.select(Submission.id, Submission.user_id, counted_score(added))
        .outerjoin(added, added.c.sid == Submission.id).where(graded)).all(), policy)
    checks: dict[str, CheckStats] = {}
    scores, speedups, peaks = [], [], defaultdict(list)
    n = 0
    for sid, score, top, report in db.session.execute(
            db.select(Submission.id, Submission.score, Submission.max_score, Submission.report_json).where(graded)):
        n += 1
        latest = sid in latest_ids
        report = report or {}
        for c in report.get("checks", []):
            st = checks.setdefault(c["id"], CheckStats(c["id"], c.get("title") or {"zh": c["id"], "en": c["id"]}))
            # a field held for a teacher (provisional until confirmed) is waiting, not failed
            bad = c.get("status") in FAILING and (c.get("evidence") or {}).get("review") != "pending"
            st.ran_all += 1
            st.failing_all += bad
            if latest:
                st.students += 1
                if bad:
                    st.failing.append(sid)
        if latest:
            _measurements(report.get("plots") or {}, speedups, peaks)
    ordered = sorted(checks.values(), key=lambda c: (-c.share, c.check_id))
    scores = _class_fractions(course_id, assignment_id)
    return HomeworkStats(ordered, len(latest_ids), n, scores, speedups, dict(peaks), policy)


def _measurements(plots: dict[str, Any], speedups: list[float], peaks: dict[str, list[float]]) -> None:
    """Speed-up from the throughput columns and per-rank peak memory, where the report has them."""
    tp = plots.get("throughput")
    if isinstance(tp, dict) and isinstance(tp.get("samples_per_s"), list):
        vals = tp["samples_per_s"]
        if len(vals) >= 2 and all(isinstance(v, (int, float)) for v in vals[:2]) and vals[0]:
            speedups.append(vals[-1] / vals[0])
    mem = plots.get("memory")
    if isinstance(mem, dict):
        for r in mem.get("ranks") or []:
            if isinstance(r, dict) and isinstance(r.get("peak"), (int, float)):
                peaks[f"rank{r.get('rank')}"].append(float(r["peak"]))


def histogram(fractions: list[float], bins: int = 10) -> dict[str, float]:
    """Counts of scores (as fractions of the maximum) in ``bins`` equal bins labelled by percent."""
    counts = [0] * bins
    for f in fractions:
        counts[min(bins - 1, max(0, int(f * bins)))] += 1
    step = 100 // bins
    return {f"{i * step}–{(i + 1) * step}%": float(c) for i, c in enumerate(counts)}


def value_histogram(values: list[float], edges: list[float]) -> dict[str, float]:
    """Counts of ``values`` in [edges[i], edges[i+1]), the last bin open-ended."""
    counts = [0] * len(edges)
    for v in values:
        i = max((j for j, e in enumerate(edges) if v >= e), default=0)
        counts[i] += 1
    labels = [f"{edges[i]:g}–{edges[i + 1]:g}" for i in range(len(edges) - 1)] + [f"≥{edges[-1]:g}"]
    return dict(zip(labels, map(float, counts)))
