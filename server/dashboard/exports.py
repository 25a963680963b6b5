"""Grade exports for an LMS and for archives: Canvas CSV, Moodle CSV, Gradescope results, JSON lines.

Canvas's gradebook import matches students by one of ID / SIS User ID / SIS Login ID and reads
every column after the five fixed ones as an assignment (a column it does not know becomes a
new assignment); a "Points Possible" row right after the header sets the maxima. Moodle's CSV
import lets the teacher pick the column that identifies the user (email address or username)
and map each remaining column to a grade item. Empty cells mean "no grade" in both.

Only what counts goes out (``Gradebook.counted_items``: homework and graded quizzes, each
out of its defined maximum); practice quizzes stay on the dashboard.
"""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Iterator

from coursework.report import GradeReport
from coursework.text import SCORE_DECIMALS, pick, score_text
from server.scores.gradebook import Gradebook
from server.scores.hand_scores import merged_report, submission_score, submission_scores
from server.extensions import db
from server.homework.points import item_total
from server.models import FINISHED_STATUSES, Submission, User
from server.scores.release import hidden_items

CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _fmt(value: float | None) -> str:
    """A score as the pages show it (``coursework.text.score_text``: the one rounding rule), "" for none."""
    return "" if value is None else score_text(value)


def _column(item, lang: str) -> str:
    title = pick(item.title, lang) or item.ref
    return f"{title} [{item.key}]"  # the key keeps two same-titled items apart


# A cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets (tab and
# CR too: some strip them first). OWASP's advice: prefix such a cell with a single quote, which the
# spreadsheet shows as text, and quote every field.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?")


def neutralise(cell: str) -> str:
    """``cell`` as inert text for a spreadsheet: a leading formula character gets a ``'`` in front.

    Numbers we wrote ourselves (a negative score) stay numbers; a name, an email or a title never
    starts a formula, whoever typed it (students choose their display names).
    """
    if cell[:1] in _FORMULA_START and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def _write(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_ALL).writerows(
        [[neutralise(str(c)) for c in row] for row in rows])
    return "\ufeff" + buf.getvalue()  # BOM: spreadsheet programs then read UTF-8 names correctly


def _cell(book: Gradebook, row, item, hidden: set[str]) -> str:
    """One exported grade: empty while the item is not released (an LMS would show it to the student)."""
    if item.key in hidden or item.key not in row.cells:
        return ""
    return _fmt(row.cells[item.key].score)


WAITING_COLUMN = "Free-text answers waiting for a teacher (unconfirmed points counted)"


def _waiting(r, items) -> str:
    """One row's provisional free text: "2 (1.5)" = two answers wait, 1.5 of the points shown are
    the reader's unconfirmed suggestion (0 when the course counts only confirmed verdicts). The
    count includes answers waiting in attempts that do not count now (a confirmation may make
    one of them count), as the gradebook's cells show them."""
    cells = [r.cells[i.key] for i in items if i.key in r.cells]
    n = sum(c.waiting + c.waiting_elsewhere for c in cells)
    return f"{n} ({sum(c.unconfirmed for c in cells):g})" if n else ""


def _any_waiting(book: Gradebook, items) -> bool:
    return any(r.cells[i.key].waiting or r.cells[i.key].waiting_elsewhere
               for r in book.rows for i in items if i.key in r.cells)


def canvas_csv(book: Gradebook, lang: str = "en") -> str:
    """The gradebook in Canvas's import layout (students by SIS User ID = username); an item whose
    results are not released yet (``server.scores.release``) goes out with empty cells. While free-text
    answers wait for a teacher, a last column says so per student, with the unconfirmed points the
    scores include (Canvas leaves a column without points possible unmapped)."""
    items, hidden = book.counted_items, hidden_items(book.course.id)
    shown = [i for i in items if i.key not in hidden]
    extra = _any_waiting(book, shown)
    rows = [CANVAS_FIXED + [_column(i, lang) for i in items] + ([WAITING_COLUMN] if extra else [])]
    rows.append(["Points Possible", "", "", "", ""] + [_fmt(i.max_score) for i in items] + ([""] if extra else []))
    for r in book.rows:
        rows.append([r.name or r.username, "", r.username, r.email or r.username, book.course.code]
                    + [_cell(book, r, i, hidden) for i in items]
                    + ([_waiting(r, shown)] if extra else []))
    return _write(rows)


def moodle_csv(book: Gradebook, lang: str = "en") -> str:
    """The gradebook for Moodle's "Import grades from CSV": map "Email address" (or "Username");
    unreleased items go out empty and waiting free text gets a last column, as for Canvas."""
    items, hidden = book.counted_items, hidden_items(book.course.id)  # Moodle has no maxima row: each header says what the column is out of
    shown = [i for i in items if i.key not in hidden]
    extra = _any_waiting(book, shown)
    rows = [["Email address", "Username", "Full name"] + [f"{_column(i, lang)} (/ {_fmt(i.max_score)})" for i in items]
            + ([WAITING_COLUMN] if extra else [])]
    for r in book.rows:
        rows.append([r.email, r.username, r.name or r.username]
                    + [_cell(book, r, i, hidden) for i in items]
                    + ([_waiting(r, shown)] if extra else []))
    return _write(rows)


def gradescope_results(sub: Submission, lang: str = "en") -> dict[str, Any]:
    """One submission as Gradescope's autograder ``results.json`` (the report's own exporter): the
    tests carry the teacher's hand-given points, the score is the submission's score that counts
    (``hand_scores``, as on every page)."""
    merged = merged_report(sub.id, sub.report_json or {})
    report = GradeReport.from_dict(merged or {"assignment": sub.assignment_id, "status": "error"})
    out = report.to_gradescope(lang)
    counted = submission_score(sub).counted
    if counted is not None:
        out["score"] = round(counted, SCORE_DECIMALS)  # as the pages round it
    return out


def reports_jsonl(course_id: int, assignment_id: str | None = None, batch: int = 200) -> Iterator[str]:
    """Every finished submission of the course (or one homework) with its report, one JSON per line.

    ``counted_score`` is the submission's score that counts: the grader's score plus what the
    teacher's hand-given scores add (manual cells, annotation decisions; nothing while an
    integrity review holds it at 0), the number every page, the gradebook and the Gradescope
    export show for it before the homework's late penalty and score policy. ``grader_score`` is
    the score the grader stored and ``hand_given_points`` the difference; ``report`` is the
    grader's report as stored, without the hand-given points (they are in the database's manual
    scores and audit log). A submission without a score (a grading error) has ``null`` scores.
    ``released`` says whether its student may see the score yet (``server.scores.release``): the archive
    keeps every score, marked.
    Streams in id order a batch at a time, so the archive of a large class never sits in memory.
    """
    last = 0
    hidden = hidden_items(course_id)
    while True:
        q = (db.select(Submission, User.username).join(User, User.id == Submission.user_id)
             .where(Submission.course_id == course_id, Submission.id > last,
                    Submission.status.in_(FINISHED_STATUSES))
             .order_by(Submission.id).limit(batch)
             .options(db.undefer(Submission.report_json)))
        if assignment_id:
            q = q.where(Submission.assignment_id == assignment_id)
        rows = db.session.execute(q).all()
        if not rows:
            return
        scores = submission_scores([sub.id for sub, _ in rows])
        for sub, username in rows:
            last = sub.id
            score = scores[sub.id]
            yield json.dumps({"submission": sub.id, "username": username, "assignment": sub.assignment_id,
                              "status": sub.status, "counted_score": score.counted, "grader_score": score.stored,
                              "hand_given_points": score.added, "max_score": sub.max_score,
                              "points_possible": item_total("hw", sub.assignment_id),
                              "created_at": sub.created_at.isoformat() + "Z", "sha256": sub.sha256,
                              "released": f"hw:{sub.assignment_id}" not in hidden,
                              "report": sub.report_json}, ensure_ascii=False, sort_keys=True) + "\n"
        db.session.expunge_all()
