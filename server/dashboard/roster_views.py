"""Instructor pages of the dashboard: import a CSV roster and list a homework's submissions with staff
detail. Their own blueprint, ``instructor``, keeps the /instructor/ addresses and endpoint names.

Every page checks the instructor role in *that* course; teaching one course gives
no view into another (404, as for students).
"""
from __future__ import annotations

from flask import Blueprint, abort, render_template, request
from flask_babel import gettext as _
from flask_login import current_user
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired

from server.access import course_or_404
from server.scores.hand_scores import submission_scores
from server.extensions import db
from server.models import CourseAssignment, Membership, Role, Submission, User
from server.roster import import_csv

bp = Blueprint("instructor", __name__, url_prefix="/instructor")


class RosterForm(FlaskForm):
    file = FileField("file", validators=[FileRequired()])


@bp.route("/")
def index():
    """The courses this user teaches, each with its roster and homework links."""
    courses = [m.course for m in current_user.memberships if m.role == Role.INSTRUCTOR.value]
    if not courses:
        abort(404)
    return render_template("instructor/index.html", courses=courses)


@bp.route("/<code>/roster", methods=["GET", "POST"])
def roster(code: str):
    """Show the members; a CSV upload enrols students and shows generated passwords once."""
    course = course_or_404(code, instructor=True)
    form = RosterForm()
    result, status = None, 200
    if request.method == "POST":
        if form.validate_on_submit():
            result = import_csv(course, form.file.data.read())
            status = 400 if result.errors else 200
        else:
            result, status = None, 400
            form.file.errors = [_("Choose a CSV file to upload.")]
    members = db.session.execute(
        db.select(User, Membership.role).join(Membership, Membership.user_id == User.id)
        .where(Membership.course_id == course.id).order_by(Membership.role.desc(), User.username)).all()
    return render_template("instructor/roster.html", course=course, form=form, result=result,
                           members=members), status


@bp.route("/<code>/<assignment_id>")
def submissions(code: str, assignment_id: str):
    """Every submission of one homework, newest first; errored ones show the staff traceback."""
    course = course_or_404(code, instructor=True)
    settings = db.session.scalar(db.select(CourseAssignment).where(
        CourseAssignment.course_id == course.id, CourseAssignment.assignment_id == assignment_id))
    if settings is None:
        abort(404)
    subs = db.session.scalars(db.select(Submission).where(
        Submission.course_id == course.id, Submission.assignment_id == assignment_id)
        .order_by(Submission.id.desc())).all()
    return render_template("instructor/submissions.html", course=course, settings=settings, subs=subs,
                           scores=submission_scores([s.id for s in subs]))  # stored + hand-given
