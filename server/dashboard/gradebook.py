"""The gradebook: every student x every item (homework and quizzes) of a course, in a fixed number
of aggregate queries, whatever the class size.

A homework cell is the best or last graded submission (per the item's policy) plus its manual
cell scores, with the late penalty applied to submissions after the student's deadline (the
course deadline or their extension); a quiz cell is the best or last finished attempt. An
instructor's override replaces the computed score. Nothing here loops over students with a
query inside: each table is read once, grouped by (student, item), and joined in Python.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_

from graders.assignments import load as load_assignment
from graders.exceptions import AssignmentNotFound
from graders.quiz.bank import BankError, all_quiz_ids, load_quiz
from server.dashboard.models import Extension, ManualCellScore, ScoreOverride
from server.extensions import db
from server.models import Course, CourseAssignment, Membership, Role, Submission, SubmissionStatus, User
from server.quiz.models import AttemptStatus, QuizAttempt


@dataclass
class Item:
    """One gradebook column."""

    key: str  # "hw:<assignment_id>" | "quiz:<quiz_id>"
    kind: str  # hw | quiz
    ref: str  # the assignment or quiz id
    title: dict[str, str]
    policy: str = "best"
    max_score: float = 0.0
    deadline: datetime | None = None
    penalty_per_day: float = 0.0
    settings_id: int | None = None  # CourseAssignment.id for homework


@dataclass(slots=True)
class Cell:
    """One student's result on one item."""

    score: float | None  # what counts (after penalty and override); None: nothing yet
    computed: float | None  # before the override
    max_score: float | None
    attempts: int
    late: bool = False
    overridden: bool = False


@dataclass(slots=True)
class Row:
    user_id: int
    username: str
    name: str
    email: str
    cells: dict[str, Cell] = field(default_factory=dict)
    total: float = 0.0
    missing: int = 0  # items with nothing counted yet


@dataclass
class Gradebook:
    course: Course
    items: list[Item]
    rows: list[Row]

    @property
    def total_max(self) -> float:
        return round(sum(i.max_score for i in self.items), 4)

    def item_mean(self, key: str) -> float | None:
        """Mean counted score over the students who have one."""
        scores = [r.cells[key].score for r in self.rows if key in r.cells and r.cells[key].score is not None]
        return round(sum(scores) / len(scores), 2) if scores else None

    def item(self, key: str) -> Item | None:
        return next((i for i in self.items if i.key == key), None)


def late_factor(submitted: datetime, due: datetime | None, penalty_per_day: float) -> float:
    """The fraction of a score kept: ``penalty_per_day`` is lost per started day past ``due``."""
    if due is None or submitted <= due or penalty_per_day <= 0:
        return 1.0
    days = math.ceil((submitted - due).total_seconds() / 86400)
    return max(0.0, 1.0 - penalty_per_day * days)


def _title(kind: str, ref: str) -> dict[str, str]:
    try:
        return load_assignment(ref).title if kind == "hw" else load_quiz(ref).title
    except (AssignmentNotFound, BankError):
        return {"zh": ref, "en": ref}


def course_items(course: Course, quiz_ids_seen: set[str] = frozenset()) -> list[Item]:
    """Homework of the course by deadline, then graded quizzes and any quiz its students took."""
    settings = db.session.scalars(db.select(CourseAssignment).where(CourseAssignment.course_id == course.id)).all()
    items = [Item(f"hw:{ca.assignment_id}", "hw", ca.assignment_id, _title("hw", ca.assignment_id),
                  ca.score_policy, 0.0, ca.deadline, ca.late_penalty_per_day, ca.id)
             for ca in sorted(settings, key=lambda c: (c.deadline or datetime.max, c.assignment_id))]
    for quiz_id in sorted(set(all_quiz_ids()) | set(quiz_ids_seen)):
        try:
            quiz = load_quiz(quiz_id)
        except BankError:
            quiz = None
        if quiz is None and quiz_id not in quiz_ids_seen:
            continue
        if quiz is not None and quiz.mode != "graded" and quiz_id not in quiz_ids_seen:
            continue
        items.append(Item(f"quiz:{quiz_id}", "quiz", quiz_id, quiz.title if quiz else {"zh": quiz_id, "en": quiz_id},
                          quiz.score_policy if quiz else "best"))
    return items


def students_of(course_id: int) -> list[tuple]:
    return db.session.execute(
        db.select(User.id, User.username, User.display_name, User.email)
        .join(Membership, Membership.user_id == User.id)
        .where(Membership.course_id == course_id, Membership.role == Role.STUDENT.value)
        .order_by(User.username)).all()


def _manual_sums(course_id: int):
    """Subquery: manual cell points per submission of the course."""
    return (db.select(ManualCellScore.submission_id.label("sid"), func.sum(ManualCellScore.score).label("pts"))
            .join(Submission, Submission.id == ManualCellScore.submission_id)
            .where(Submission.course_id == course_id).group_by(ManualCellScore.submission_id).subquery())


def _homework_cells(course_id: int, items: dict[str, Item]) -> dict[tuple[int, str], Cell]:
    """(user_id, assignment_id) -> Cell, from three grouped queries over graded submissions."""
    manual = _manual_sums(course_id)
    due = func.coalesce(Extension.deadline, CourseAssignment.deadline)
    total = Submission.score + func.coalesce(manual.c.pts, 0.0)
    on_time = or_(due.is_(None), Submission.created_at <= due)
    base = (db.select().select_from(Submission)
            .join(CourseAssignment, and_(CourseAssignment.course_id == Submission.course_id,
                                         CourseAssignment.assignment_id == Submission.assignment_id))
            .outerjoin(Extension, and_(Extension.course_assignment_id == CourseAssignment.id,
                                       Extension.user_id == Submission.user_id))
            .outerjoin(manual, manual.c.sid == Submission.id)
            .where(Submission.course_id == course_id, Submission.status == SubmissionStatus.GRADED.value))
    grouped = db.session.execute(base.add_columns(
        Submission.user_id, Submission.assignment_id, func.count(Submission.id),
        func.max(case((on_time, total))), func.max(Submission.max_score), func.max(Submission.id),
        func.sum(case((on_time, 0), else_=1)))
        .group_by(Submission.user_id, Submission.assignment_id)).all()
    # Late and last submissions are the only ones needing their own time: read just those.
    late = db.session.execute(base.add_columns(Submission.id, Submission.user_id, Submission.assignment_id,
                                               total, Submission.created_at, due)
                              .where(~on_time)).all()
    last_ids = [r[5] for r in grouped if items.get(f"hw:{r[1]}") and items[f"hw:{r[1]}"].policy == "last"]
    last = {}
    if last_ids:
        last = {r[0]: r for r in db.session.execute(
            base.add_columns(Submission.id, total, Submission.created_at, due).where(Submission.id.in_(last_ids)))}
    penalised: dict[int, float] = {}
    best_late: dict[tuple[int, str], float] = {}
    for sid, uid, aid, score, created, deadline in late:
        item = items.get(f"hw:{aid}")
        kept = (score or 0.0) * late_factor(created, deadline, item.penalty_per_day if item else 0.0)
        penalised[sid] = kept
        best_late[(uid, aid)] = max(best_late.get((uid, aid), 0.0), kept)
    cells = {}
    for uid, aid, n, best_on_time, top, last_id, n_late in grouped:
        item = items.get(f"hw:{aid}")
        if item is None:
            continue
        if item.policy == "last" and last_id in last:
            _, score, _, _ = last[last_id]
            score = penalised.get(last_id, score)
            is_late = last_id in penalised
        else:
            candidates = [s for s in (best_on_time, best_late.get((uid, aid))) if s is not None]
            score = max(candidates) if candidates else None
            is_late = bool(n_late)
        score = None if score is None else round(score, 4)
        cells[(uid, aid)] = Cell(score, score, top, n, is_late)
        item.max_score = max(item.max_score, top or 0.0)
    return cells


def _quiz_cells(course_id: int, policies: dict[str, str]) -> dict[tuple[int, str], Cell]:
    """(user_id, quiz_id) -> Cell from finished attempts, one grouped query (+1 for 'last' quizzes)."""
    finished = and_(QuizAttempt.course_id == course_id, QuizAttempt.status != AttemptStatus.OPEN.value)
    grouped = db.session.execute(
        db.select(QuizAttempt.user_id, QuizAttempt.quiz_id, func.count(QuizAttempt.id), func.max(QuizAttempt.score),
                  func.max(QuizAttempt.max_score), func.max(QuizAttempt.attempt_no))
        .where(finished).group_by(QuizAttempt.user_id, QuizAttempt.quiz_id)).all()
    last_quizzes = [q for q, p in policies.items() if p == "last"]
    last: dict[tuple[int, str], float] = {}
    if last_quizzes:
        newest = (db.select(QuizAttempt.user_id.label("u"), QuizAttempt.quiz_id.label("q"),
                            func.max(QuizAttempt.attempt_no).label("n"))
                  .where(finished, QuizAttempt.quiz_id.in_(last_quizzes))
                  .group_by(QuizAttempt.user_id, QuizAttempt.quiz_id).subquery())
        last = {(u, q): s for u, q, s in db.session.execute(
            db.select(QuizAttempt.user_id, QuizAttempt.quiz_id, QuizAttempt.score).join(newest, and_(
                newest.c.u == QuizAttempt.user_id, newest.c.q == QuizAttempt.quiz_id,
                newest.c.n == QuizAttempt.attempt_no)))}
    cells = {}
    for uid, qid, n, best, top, _ in grouped:
        score = last.get((uid, qid), best) if policies.get(qid) == "last" else best
        cells[(uid, qid)] = Cell(score, score, top, n)
    return cells


def build_gradebook(course: Course) -> Gradebook:
    """The whole class: rows in username order, one cell per item (absent: nothing counted yet)."""
    quiz_seen = set(db.session.scalars(db.select(QuizAttempt.quiz_id).where(
        QuizAttempt.course_id == course.id).distinct()))
    items = course_items(course, quiz_seen)
    by_key = {i.key: i for i in items}
    hw = _homework_cells(course.id, by_key)
    quiz = _quiz_cells(course.id, {i.ref: i.policy for i in items if i.kind == "quiz"})
    for (uid, qid), cell in quiz.items():
        item = by_key.get(f"quiz:{qid}")
        if item is not None:
            item.max_score = max(item.max_score, cell.max_score or 0.0)
    overrides = {(uid, key): score for uid, key, score in db.session.execute(
        db.select(ScoreOverride.user_id, ScoreOverride.item, ScoreOverride.score)
        .where(ScoreOverride.course_id == course.id))}
    rows = []
    for uid, username, name, email in students_of(course.id):
        row = Row(uid, username, name or "", email or "")
        for item in items:
            cell = (hw if item.kind == "hw" else quiz).get((uid, item.ref))
            if (uid, item.key) in overrides:
                cell = cell or Cell(None, None, item.max_score, 0)
                cell.score, cell.overridden = overrides[(uid, item.key)], True
            if cell is not None:
                row.cells[item.key] = cell
            if cell is None or cell.score is None:
                row.missing += 1
            else:
                row.total += cell.score
        row.total = round(row.total, 4)
        rows.append(row)
    return Gradebook(course, items, rows)


def sort_and_filter(book: Gradebook, *, q: str = "", sort: str = "username", desc: bool = False,
                    behind: bool = False) -> list[Row]:
    """The rows matching ``q`` (username, name or email), optionally only those behind, sorted."""
    rows = book.rows
    if q:
        needle = q.lower()
        rows = [r for r in rows if needle in r.username.lower() or needle in r.name.lower()
                or needle in r.email.lower()]
    if behind:
        rows = [r for r in rows if r.missing or (book.total_max and r.total < 0.6 * book.total_max)]
    if sort == "total":
        key: Any = lambda r: r.total
    elif sort == "name":
        key = lambda r: (r.name or r.username).lower()
    elif sort in {i.key for i in book.items}:
        key = lambda r: (r.cells[sort].score if sort in r.cells and r.cells[sort].score is not None else -1.0)
    else:
        key = lambda r: r.username
    return sorted(rows, key=key, reverse=desc)


__all__ = ["Cell", "Gradebook", "Item", "Row", "build_gradebook", "late_factor", "sort_and_filter"]
