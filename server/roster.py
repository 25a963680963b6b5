"""Enrolment: add people to a course from a CSV roster or one at a time."""
from __future__ import annotations

import csv
import io
import secrets
from dataclasses import dataclass, field

from coursework.report import text
from server.extensions import db
from server.models import Course, CourseAssignment, Membership, Role, User
from coursework.assignments import all_assignments

ROSTER_COLUMNS = ("username", "display_name", "email", "password")


@dataclass
class RosterResult:
    """What an import did, row by row, so the instructor can fix a bad file."""

    created: list[tuple[str, str]] = field(default_factory=list)  # (username, initial password)
    enrolled: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)  # {"zh", "en"}: "line 3: missing username"


def enrol(course: Course, username: str, *, role: Role = Role.STUDENT, password: str | None = None,
          display_name: str = "", email: str = "") -> tuple[User, str | None]:
    """Create the user if needed and enrol them; returns the user and a new password if one was made."""
    user = db.session.scalar(db.select(User).where(User.username == username))
    new_password = None
    if user is None:
        new_password = password or secrets.token_urlsafe(9)
        user = User(username=username, display_name=display_name or username, email=email)
        user.set_password(new_password)
        db.session.add(user)
        db.session.flush()
    membership = db.session.scalar(db.select(Membership).where(
        Membership.user_id == user.id, Membership.course_id == course.id))
    if membership is None:
        db.session.add(Membership(user_id=user.id, course_id=course.id, role=role.value))
    else:
        membership.role = role.value
    return user, new_password


def import_csv(course: Course, data: bytes) -> RosterResult:
    """Import a roster CSV (header: username[,display_name,email,password]); all or nothing."""
    result = RosterResult()
    try:
        reader = csv.DictReader(io.StringIO(data.decode("utf-8-sig")))
    except UnicodeDecodeError:
        result.errors.append(text("文件不是 UTF-8 文本（请用 UTF-8 另存为 CSV）", "the file is not UTF-8 text"))
        return result
    if not reader.fieldnames or "username" not in [f.strip() for f in reader.fieldnames]:
        result.errors.append(text("第一行必须是表头，且包含 'username' 列",
                                  "the first line must be a header with a 'username' column"))
        return result
    rows = []
    for line_no, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        name = row.get("username", "")
        if not name:
            result.errors.append(text(f"第 {line_no} 行：缺少用户名", f"line {line_no}: missing username"))
        elif len(name) > 80 or any(c.isspace() for c in name):
            result.errors.append(text(f"第 {line_no} 行：用户名 {name!r} 无效（不能含空白，最多 80 个字符）",
                                      f"line {line_no}: invalid username {name!r}"))
        else:
            rows.append(row)
    if result.errors:
        return result
    for row in rows:
        user, pw = enrol(course, row["username"], password=row.get("password") or None,
                         display_name=row.get("display_name", ""), email=row.get("email", ""))
        result.enrolled.append(user.username)
        if pw:
            result.created.append((user.username, pw))
    db.session.commit()
    return result


def ensure_course(code: str, title: str) -> Course:
    """Get or create a course and publish every assignment folder in it."""
    course = db.session.scalar(db.select(Course).where(Course.code == code))
    if course is None:
        course = Course(code=code, title=title)
        db.session.add(course)
        db.session.flush()
    published = {h.assignment_id for h in course.homework}
    for a in all_assignments():
        if a.id not in published:
            db.session.add(CourseAssignment(course_id=course.id, assignment_id=a.id,
                                            attempt_limit=a.attempts))
    db.session.flush()
    return course
