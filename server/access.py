"""Who may see what: course roles decide, and anything not yours is simply not there (404).

Shared by the page blueprints and the JSON API so both answer the same way.
"""
from __future__ import annotations

from flask import abort
from flask_login import current_user

from server.extensions import db
from server.models import Course, CourseAssignment, Membership, Role, Submission, User


def is_instructor_of(course_id: int) -> bool:
    """True if the signed-in user teaches this course."""
    return current_user.role_in(course_id) == Role.INSTRUCTOR


def submission_or_404(submission_id: int) -> Submission:
    """The submission if it is the user's own or they teach its course; 404 otherwise.

    404 rather than 403 so ids of other students' work reveal nothing.
    """
    sub = db.session.get(Submission, submission_id)
    if sub is None or not (sub.user_id == current_user.id or is_instructor_of(sub.course_id)):
        abort(404)
    return sub


def course_or_404(code: str, *, instructor: bool = False) -> Course:
    """A course the user belongs to (as an instructor if asked); 404 otherwise."""
    course = db.session.scalar(db.select(Course).where(Course.code == code))
    if course is None:
        abort(404)
    role = current_user.role_in(course.id)
    if role is None or (instructor and role != Role.INSTRUCTOR):
        abort(404)
    return course


def student_or_404(course_id: int, username: str) -> User:
    user = db.session.scalar(db.select(User).join(Membership, Membership.user_id == User.id).where(
        User.username == username, Membership.course_id == course_id, Membership.role == Role.STUDENT.value))
    if user is None:
        abort(404)
    return user


def course_submission_or_404(course_id: int, submission_id: int) -> Submission:
    """A submission of this course, or 404 (ids from other courses reveal nothing)."""
    sub = db.session.get(Submission, submission_id)
    if sub is None or sub.course_id != course_id:
        abort(404)
    return sub


def settings_or_404(course_id: int, assignment_id: str) -> CourseAssignment:
    ca = db.session.scalar(db.select(CourseAssignment).where(
        CourseAssignment.course_id == course_id, CourseAssignment.assignment_id == assignment_id))
    if ca is None:
        abort(404)
    return ca
