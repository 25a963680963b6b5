"""The gradebook: every student x every item (homework and quizzes) of a course, in a fixed number
of aggregate queries, whatever the class size.

A homework cell is the best or last graded submission (per the item's policy) with what its
hand-given scores add (``server.scores.hand_scores``, the one definition), with the late
penalty applied to submissions after the student's deadline (the course deadline or their
extension); a quiz cell is the best or last finished attempt. An
instructor's override replaces the computed score (and carries its reason to the student).

Every column is out of the item's own maximum (``server.homework.points``: from
``assignment.json`` or the quiz), known before anyone submits. The total is one sum, defined
once here: every homework of the course and every graded quiz; practice quizzes are shown,
labelled, and never counted. A student with nothing counted has no total (``None``: "-"). Nothing here loops over students with a
query inside: each table is read once, grouped by (student, item), and joined in Python.
"""
from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, and_, case, func, literal, or_

from coursework.assignments import load as load_assignment
from coursework.exceptions import AssignmentNotFound
from coursework.quiz.bank import BankError, all_quiz_ids, load_quiz
from server.scores.hand_scores import added_points_table, counted_score, unconfirmed_points, waiting_annotations
from server.scores.models import Extension, ScoreOverride
from server.extensions import db
from server.homework.points import item_total, natural_key
from server.models import (PENDING_STATUSES, Course, CourseAssignment, Membership, Role, Submission, SubmissionStatus,
                           User)
from server.quiz.models import AttemptStatus, QuizAttempt
from server.scores.models import Regrade
from server.quiz.waiting import mark_cells


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
    counted: bool = True  # part of the total (homework and graded quizzes; not practice)
    defined_max: bool = False  # max_score is the definition's, not the highest one seen


@dataclass(slots=True)
class Cell:
    """One student's result on one item."""

    score: float | None  # what counts (after penalty and override); None: nothing yet
    computed: float | None  # before the override
    max_score: float | None
    attempts: int
    late: bool = False
    overridden: bool = False
    reason: str = ""  # the override's reason (shown to the student)
    waiting: int = 0  # free-text answers of the counted attempt a teacher has not confirmed yet
    unconfirmed: float = 0.0  # of the score, points no teacher confirmed (the course counts them)
    suggested: float = 0.0  # what the readers suggest for the waiting answers (counted or not)
    waiting_elsewhere: int = 0  # free-text answers waiting in the student's other attempts (may count once confirmed)
    review: bool = False  # a graded submission of this item awaits an integrity review: not final, not in means


@dataclass(slots=True)
class Row:
    user_id: int
    username: str
    name: str
    email: str
    cells: dict[str, Cell] = field(default_factory=dict)
    total: float | None = None  # sum of the counted items; None: nothing counted yet
    missing: int = 0  # counted items with nothing yet


@dataclass
class Gradebook:
    course: Course
    items: list[Item]
    rows: list[Row]

    @property
    def total_max(self) -> float:
        """What every total is out of: the maxima of the counted items."""
        return round(sum(i.max_score for i in self.items if i.counted), 4)

    @property
    def counted_items(self) -> list[Item]:
        return [i for i in self.items if i.counted]

    def item_mean(self, key: str) -> float | None:
        """Mean counted score over the students who have one (cells under integrity review left out)."""
        scores = [r.cells[key].score for r in self.rows
                  if key in r.cells and r.cells[key].score is not None and not r.cells[key].review]
        return round(sum(scores) / len(scores), 2) if scores else None

    def item_means(self) -> dict[str, float | None]:
        """``item_mean`` of every item in one pass over the rows (same sums, in the same order)."""
        scores: dict[str, list[float]] = {i.key: [] for i in self.items}
        for r in self.rows:
            for key, cell in r.cells.items():
                if cell.score is not None and key in scores and not cell.review:
                    scores[key].append(cell.score)
        return {key: round(sum(s) / len(s), 2) if s else None for key, s in scores.items()}

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


def _with_max(item: Item) -> Item:
    """Set the item's maximum from its definition where there is one."""
    top = item_total(item.kind, item.ref)
    if top:
        item.max_score, item.defined_max = top, True
    return item


def course_items(course: Course, quiz_ids_seen: set[str] = frozenset()) -> list[Item]:
    """Homework of the course by deadline (then title, so "Homework 1, 2, 3"), then graded quizzes
    and any practice quiz its students took (shown, not counted)."""
    settings = db.session.scalars(db.select(CourseAssignment).where(CourseAssignment.course_id == course.id)).all()
    homework = [Item(f"hw:{ca.assignment_id}", "hw", ca.assignment_id, _title("hw", ca.assignment_id),
                     ca.score_policy, 0.0, ca.deadline, ca.late_penalty_per_day, ca.id) for ca in settings]
    items = [_with_max(i) for i in sorted(homework, key=lambda i: (i.deadline or datetime.max,
                                                                   natural_key(i.title.get("en") or i.ref), i.ref))]
    for quiz_id in sorted(set(all_quiz_ids()) | set(quiz_ids_seen)):
        try:
            quiz = load_quiz(quiz_id)
        except BankError:
            quiz = None
        if quiz is None and quiz_id not in quiz_ids_seen:
            continue
        if quiz is not None and quiz.mode != "graded" and quiz_id not in quiz_ids_seen:
            continue
        items.append(_with_max(Item(f"quiz:{quiz_id}", "quiz", quiz_id,
                                    quiz.title if quiz else {"zh": quiz_id, "en": quiz_id},
                                    quiz.score_policy if quiz else "best",
                                    counted=quiz is not None and quiz.mode == "graded")))
    return items


def students_of(course_id: int, user_id: int | None = None) -> list[tuple]:
    q = (db.select(User.id, User.username, User.display_name, User.email)
         .join(Membership, Membership.user_id == User.id)
         .where(Membership.course_id == course_id, Membership.role == Role.STUDENT.value)
         .order_by(User.username))
    if user_id is not None:
        q = q.where(User.id == user_id)
    return db.session.execute(q).all()


def _cell_from(subs: list[tuple[int, float, datetime]], item: Item, due: datetime | None,
               top: float | None) -> Cell:
    """One cell from a student's graded submissions ``(id, score, created_at)`` (the detail path)."""
    kept = {sid: (score or 0.0) * late_factor(created, due, item.penalty_per_day) for sid, score, created in subs}
    late = {sid for sid, _, created in subs if due is not None and created > due}
    if item.policy == "last":
        last = max(kept)
        score, is_late = kept[last], last in late
    else:
        score, is_late = max(kept.values()), bool(late)
    return Cell(round(score, 4), round(score, 4), top, len(subs), is_late)


def _homework_cells(course_id: int, items: dict[str, Item], user_id: int | None = None) -> dict[tuple[int, str], Cell]:
    """(user_id, assignment_id) -> Cell over graded submissions (+ what hand-given scores add).

    One GROUP BY per (student, homework) does the common case: the course deadline is a CASE
    over the handful of homework, so no row joins a settings table. Late submissions (a
    penalty needs each one's time) and "last" policies are read by one more query over just
    those rows; students with an extension (their own deadline) by one more.
    """
    manual = added_points_table()
    deadlines = {i.ref: i.deadline for i in items.values() if i.kind == "hw" and i.deadline is not None}
    due = (case({aid: literal(d, DateTime) for aid, d in deadlines.items()}, value=Submission.assignment_id)
           if deadlines else literal(None, DateTime))
    total = counted_score(manual)  # the one definition of stored + hand-given (``hand_scores``)
    # Each row's lateness is computed once, in a subquery, and reused by the aggregates.
    graded = (db.select().select_from(Submission).outerjoin(manual, manual.c.sid == Submission.id)
              .where(Submission.course_id == course_id, Submission.status == SubmissionStatus.GRADED.value))
    if user_id is not None:
        graded = graded.where(Submission.user_id == user_id)
    rows = graded.add_columns(
        Submission.id.label("id"), Submission.user_id.label("uid"), Submission.assignment_id.label("aid"),
        total.label("total"), Submission.max_score.label("top"), Submission.created_at.label("created"),
        case((Submission.created_at > due, 1), else_=0).label("late")).subquery()
    run = db.session.connection().execute  # Core rows: no ORM loading step for thousands of tuples
    grouped = run(db.select(rows.c.uid, rows.c.aid, func.count().label("n"),
                            func.max(case((rows.c.late == 0, rows.c.total))).label("best_on_time"),
                            func.max(rows.c.top).label("top"), func.max(rows.c.id).label("last_id"),
                            func.sum(rows.c.late).label("n_late"))
                  .group_by(rows.c.uid, rows.c.aid)).all()
    # Rows are unpacked as tuples below: attribute access on tens of thousands of result rows
    # was a third of this function's own time.
    last_aids = {aid for aid, item in items.items() if item.policy == "last"}
    last_ids = [last_id for _, aid, _, _, _, last_id, _ in grouped if aid in last_aids]
    # The late submissions and the newest of each "last" cell in one pass over the class's rows.
    wanted = or_(rows.c.late == 1, rows.c.id.in_(last_ids)) if last_ids else rows.c.late == 1
    singled = run(db.select(rows.c.id, rows.c.uid, rows.c.aid, rows.c.total, rows.c.created, rows.c.late)
                  .where(wanted)).all()
    last = {sid: total_pts for sid, _, _, total_pts, _, _ in singled}  # looked up by last_id only
    penalised: dict[int, float] = {}
    best_late: dict[tuple[int, str], float] = {}
    for sid, uid, aid, total_pts, created, is_late_row in singled:
        if is_late_row != 1:
            continue
        item = items.get(aid)
        kept = (total_pts or 0.0) * late_factor(created, deadlines.get(aid), item.penalty_per_day if item else 0.0)
        penalised[sid] = kept
        best_late[(uid, aid)] = max(best_late.get((uid, aid), 0.0), kept)
    cells: dict[int, dict[str, Cell]] = {}  # user id -> item key -> cell
    tops: dict[str, float] = {}  # only for items whose definition gives no maximum
    columns = {aid: (item.key, aid in last_aids, not item.defined_max) for aid, item in items.items()}
    for uid, aid, n, best_on_time, top, last_id, n_late in grouped:
        column = columns.get(aid)
        if column is None:
            continue
        key, is_last, track_top = column
        if is_last:
            score, is_late = penalised.get(last_id, last.get(last_id)), last_id in penalised
        elif n_late:
            late_best = best_late.get((uid, aid))
            score = late_best if best_on_time is None or (late_best or 0.0) > best_on_time else best_on_time
            is_late = True
        else:  # the common case: everything on time, SQL already has the best
            score, is_late = best_on_time, False
        if score is not None and (n_late or is_last):
            score = round(score, 4)
        user_cells = cells.get(uid)
        if user_cells is None:
            user_cells = cells[uid] = {}
        user_cells[key] = Cell(score, score, top, n, is_late)
        if track_top and top and top > tops.get(aid, 0.0):
            tops[aid] = top
    for aid, top in tops.items():  # only where the definition gives none (a folder removed from disk)
        if not items[aid].defined_max:
            items[aid].max_score = max(items[aid].max_score, top)
    _apply_extensions(course_id, items, graded, total, cells)
    _keep_while_regrading(course_id, items, cells, user_id)
    _mark_under_review(course_id, items, cells, user_id)
    _mark_waiting(course_id, items, deadlines, cells, user_id)
    return cells


def _mark_waiting(course_id: int, items: dict[str, Item], deadlines: dict[str, datetime], cells,
                  user_id: int | None) -> None:
    """Set ``waiting`` / ``unconfirmed`` on the homework cells whose counted submission holds annotations
    no teacher decided yet, as ``server.quiz.waiting.mark_cells`` does for the quiz: one query
    over the few submissions that have any; the counted one is the one whose total the cell shows."""
    added = added_points_table()
    q = (db.select(Submission.user_id, Submission.assignment_id, Submission.created_at, counted_score(added),
                   waiting_annotations(added), unconfirmed_points(added))
         .join(added, added.c.sid == Submission.id)
         .where(Submission.course_id == course_id, Submission.status == SubmissionStatus.GRADED.value,
                added.c.waiting > 0))
    if user_id is not None:
        q = q.where(Submission.user_id == user_id)
    for uid, aid, created, total, waiting, unconfirmed in db.session.execute(q):
        item = items.get(aid)
        cell = cells.get(uid, {}).get(item.key) if item else None
        if cell is None or cell.computed is None or total is None or cell.waiting:
            continue
        shown = {round(total, 4), round(total * late_factor(created, deadlines.get(aid), item.penalty_per_day), 4)}
        if any(abs(s - cell.computed) < 1e-6 for s in shown):
            cell.waiting, cell.unconfirmed = int(waiting), round(float(unconfirmed or 0.0), 4)


def _mark_under_review(course_id: int, items: dict[str, Item], cells, user_id: int | None) -> None:
    """Flag the cells with a graded submission held for an integrity review (one query): the score there
    is a placeholder 0 until an instructor decides, so pages say "under review" and means leave it out."""
    q = (db.select(Submission.user_id, Submission.assignment_id).distinct()
         .where(Submission.course_id == course_id, Submission.status == SubmissionStatus.GRADED.value,
                Submission.review_status == "pending"))
    if user_id is not None:
        q = q.where(Submission.user_id == user_id)
    for uid, aid in db.session.execute(q):
        item = items.get(aid)
        cell = cells.get(uid, {}).get(item.key) if item else None
        if cell is not None:
            cell.review = True


def _keep_while_regrading(course_id: int, items: dict[str, Item], cells, user_id: int | None) -> None:
    """Submissions back in the queue for a regrade still count with their previous score until the
    new one is stored (one query; only the students concerned are recomputed)."""
    latest = (db.select(func.max(Regrade.id)).where(Regrade.course_id == course_id)
              .group_by(Regrade.submission_id))
    q = (db.select(Submission.id, Submission.user_id, Submission.assignment_id, Submission.created_at,
                   Regrade.old_score)
         .join(Regrade, Regrade.submission_id == Submission.id)
         .where(Submission.course_id == course_id, Submission.status.in_(PENDING_STATUSES),
                Regrade.id.in_(latest), Regrade.old_status == SubmissionStatus.GRADED.value))
    if user_id is not None:
        q = q.where(Submission.user_id == user_id)
    waiting = db.session.execute(q).all()
    if not waiting:
        return
    for uid, aid in {(w.user_id, w.assignment_id) for w in waiting}:
        item = items.get(aid)
        if item is None:
            continue
        subs = [(w.id, w.old_score, w.created_at) for w in waiting if (w.user_id, w.assignment_id) == (uid, aid)]
        added = added_points_table()
        subs += [tuple(r) for r in db.session.execute(
            db.select(Submission.id, counted_score(added), Submission.created_at)
            .outerjoin(added, added.c.sid == Submission.id).where(
                Submission.course_id == course_id, Submission.user_id == uid, Submission.assignment_id == aid,
                Submission.status == SubmissionStatus.GRADED.value))]
        ext = db.session.scalar(db.select(Extension.deadline).where(
            Extension.course_assignment_id == item.settings_id, Extension.user_id == uid))
        cells.setdefault(uid, {})[item.key] = _cell_from(subs, item, ext or item.deadline, item.max_score or None)


def _apply_extensions(course_id: int, items: dict[str, Item], graded, total, cells) -> None:
    """Recompute the cells of students with an extension against their own deadline."""
    ext = db.session.execute(db.select(CourseAssignment.assignment_id, Extension.user_id, Extension.deadline)
                             .join(Extension, Extension.course_assignment_id == CourseAssignment.id)
                             .where(CourseAssignment.course_id == course_id)).all()
    if not ext:
        return
    own = {(uid, aid): d for aid, uid, d in ext}
    rows: dict[tuple[int, str], list] = {}
    for aid in {aid for aid, _, _ in ext}:
        users = [uid for a, uid, _ in ext if a == aid]
        for sid, uid, score, created in db.session.execute(graded.add_columns(
                Submission.id, Submission.user_id, total, Submission.created_at)
                .where(Submission.assignment_id == aid, Submission.user_id.in_(users))):
            rows.setdefault((uid, aid), []).append((sid, score, created))
    for (uid, aid), subs in rows.items():
        item = items.get(aid)
        old = cells.get(uid, {}).get(item.key) if item else None
        if old is not None:
            cells[uid][item.key] = _cell_from(subs, item, own[(uid, aid)], old.max_score)


def _quiz_cells(course_id: int, policies: dict[str, str], user_id: int | None = None) -> dict[tuple[int, str], Cell]:
    """(user_id, quiz_id) -> Cell from finished attempts, one grouped query (+1 for 'last' quizzes)."""
    finished = and_(QuizAttempt.course_id == course_id, QuizAttempt.status != AttemptStatus.OPEN.value)
    if user_id is not None:
        finished = and_(finished, QuizAttempt.user_id == user_id)
    grouped = db.session.connection().execute(
        db.select(QuizAttempt.user_id.label("uid"), QuizAttempt.quiz_id.label("qid"), func.count(QuizAttempt.id).label("n"),
                  func.max(QuizAttempt.score).label("best"), func.max(QuizAttempt.max_score).label("top"))
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
    cells: dict[int, dict[str, Cell]] = {}  # user id -> item key -> cell
    keys = {qid: f"quiz:{qid}" for qid in {g[1] for g in grouped}}
    for uid, qid, n, best, top in grouped:
        score = last.get((uid, qid), best) if policies.get(qid) == "last" else best
        user_cells = cells.get(uid)
        if user_cells is None:
            user_cells = cells[uid] = {}
        user_cells[keys[qid]] = Cell(score, score, top, n)
    return cells


@contextmanager
def gc_paused():
    """Pause the cyclic collector while tens of thousands of small acyclic objects are built.

    Left on, it fires a full collection over the app's whole heap several times per gradebook
    (a third of the time at 2,000 students); reference counting still frees everything. A page
    that also drops the book inside the pause (the gradebook view) spares the collector the
    cells entirely: re-enabled while they are alive, it scans them once as young objects (about
    15 ms at 2,000 students) and about every other page again as older ones (about 50 ms).
    Nests: an inner pause leaves the collector as the outer one found it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_gradebook(course: Course, user_id: int | None = None) -> Gradebook:
    """The whole class: rows in username order, one cell per item (absent: nothing counted yet).

    ``user_id``: just that student's row, by the same rules (what the student's own pages show).
    """
    with gc_paused():
        return _build(course, user_id)


def _build(course: Course, user_id: int | None = None) -> Gradebook:
    quiz_seen = set(db.session.scalars(db.select(QuizAttempt.quiz_id).where(
        QuizAttempt.course_id == course.id).distinct()))
    items = course_items(course, quiz_seen)
    by_key = {i.key: i for i in items}
    hw = _homework_cells(course.id, {i.ref: i for i in items if i.kind == "hw"}, user_id)
    quiz = _quiz_cells(course.id, {i.ref: i.policy for i in items if i.kind == "quiz"}, user_id)
    for user_cells in quiz.values():
        for key, cell in user_cells.items():
            item = by_key.get(key)
            if item is not None and not item.defined_max and (cell.max_score or 0.0) > item.max_score:
                item.max_score = cell.max_score
    if quiz:
        mark_cells(course.id, {i.ref: i.policy for i in items if i.kind == "quiz"}, quiz, user_id)
    overrides: dict[int, dict[str, tuple[float, str]]] = {}
    for uid, key, score, reason in db.session.execute(
            db.select(ScoreOverride.user_id, ScoreOverride.item, ScoreOverride.score, ScoreOverride.reason)
            .where(ScoreOverride.course_id == course.id,
                   *([] if user_id is None else [ScoreOverride.user_id == user_id]))):
        if key in by_key:
            overrides.setdefault(uid, {})[key] = (score, reason or "")
    counted_keys = [i.key for i in items if i.counted]
    rows = []
    no_cells: dict[str, Cell] = {}
    for uid, username, name, email in students_of(course.id, user_id):
        cells = {**hw.get(uid, no_cells), **quiz.get(uid, no_cells)}
        if uid in overrides:
            for key, (score, reason) in overrides[uid].items():
                cell = cells.get(key) or Cell(None, None, by_key[key].max_score, 0)
                cell.score, cell.overridden, cell.reason = score, True, reason
                cells[key] = cell
        counted = []  # in item order, so the float sum is the same whatever the dict order
        for k in counted_keys:
            cell = cells.get(k)
            if cell is not None and cell.score is not None:
                counted.append(cell.score)
        rows.append(Row(uid, username, name or "", email or "", cells,
                        round(sum(counted), 4) if counted else None, len(counted_keys) - len(counted)))
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
        rows = [r for r in rows if r.missing or (book.total_max and (r.total or 0.0) < 0.6 * book.total_max)]
    if sort == "total":
        key: Any = lambda r: -1.0 if r.total is None else r.total
    elif sort == "name":
        key = lambda r: (r.name or r.username).lower()
    elif sort in {i.key for i in book.items}:
        key = lambda r: (r.cells[sort].score if sort in r.cells and r.cells[sort].score is not None else -1.0)
    else:
        key = lambda r: r.username
    return sorted(rows, key=key, reverse=desc)


__all__ = ["Cell", "Gradebook", "Item", "Row", "build_gradebook", "gc_paused", "late_factor", "sort_and_filter"]
