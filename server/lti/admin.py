"""The instructor's LTI pages: platform registration (the values the LMS asks for, and the form
for what it gives back) and each course's grade passback, with failures and a retry button."""
from __future__ import annotations

from urllib.parse import urlparse

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from server.access import course_or_404
from server.extensions import db
import requests
from pylti1p3.exception import LtiException, LtiServiceException

from server.lti import passback, registry, roster, schedule, tool
from server.lti.views import bp
from server.lti.models import LtiContext, LtiPlatform, LtiRoleChange
from server.models import Role, User
from server.lti import dynamic


@bp.route("/platforms", methods=["GET", "POST"])
def platforms():
    """Register an LMS (instructors only); the page also lists the tool's URLs to paste into it."""
    if not current_user.is_instructor_anywhere:
        abort(404)
    status = 200
    if request.method == "POST" and request.form.get("action") == "remove":
        return _remove(request.form)
    dynamic_url = ""
    if request.method == "POST" and request.form.get("action") == "dynamic":
        dynamic_url = dynamic.new_url()
    if request.method == "POST" and not dynamic_url:
        f = request.form
        try:
            tool.register_platform(f.get("issuer", "").strip(), f.get("client_id", "").strip(),
                                   f.get("login_url", "").strip(), f.get("token_url", "").strip(),
                                   f.get("jwks_url", "").strip(), f.get("deployments", "").replace(",", " ").split())
            flash(_("Platform registered."), "ok")
            return redirect(url_for("lti.platforms"))
        except tool.LaunchRefused as err:
            flash(_("The registration is incomplete or a URL is not http(s).") + f" ({err.detail}) "
                  + _("Nothing was changed."), "error")
            status = 400
    rows = db.session.scalars(db.select(LtiPlatform).order_by(LtiPlatform.id)).all()
    base = request.host_url.rstrip("/")
    host = urlparse(base).hostname or ""
    return render_template("lti/platforms.html", platforms=[(p, registry.courses_of(p.id)) for p in rows], base=base,
                           dynamic_url=dynamic_url,
                           not_public=not base.startswith("https://") or host in ("localhost", "127.0.0.1", "::1")
                           or host.startswith("127.")), status


def _remove(form):
    """Remove a deployment or a registration: only someone who teaches every course it serves."""
    try:
        pid = int(form.get("platform", ""))
    except ValueError:
        abort(404)
    if any(current_user.role_in(c.id) != Role.INSTRUCTOR for c in registry.courses_of(pid)):
        abort(404)
    deployment = form.get("deployment") or None
    if registry.remove(pid, deployment):
        flash(_("Deployment removed: its launches are refused from now on.") if deployment
              else _("Registration removed. Its courses, accounts and grades stay."), "ok")
    return redirect(url_for("lti.platforms"))


@bp.route("/<code>/passback", methods=["GET", "POST"])
def passback_page(code: str):
    """What reached the LMS for this course; POST ``retry`` (failed ones) or ``send`` (everything changed)."""
    course = course_or_404(code, instructor=True)
    link_code = ""
    if request.method == "POST" and request.form.get("action") == "link":
        link_code = registry.new_link_code(course.id)
    elif request.method == "POST":
        if request.form.get("action") == "roster":
            try:
                n = roster.sync(course.id)
            except (LtiException, LtiServiceException, requests.RequestException) as err:
                flash(_("The LMS did not answer the roster request: %(err)s", err=str(err)[:300]), "error")
            else:
                flash(_("Roster synced: %(s)d students and %(i)d instructors.", s=n["student"], i=n["instructor"]) + " "
                      + _("Observers (no role here): %(o)d. Staff no longer on the roster, role removed: %(r)d.",
                          o=n["observer"], r=n["removed"]), "ok")
        elif request.form.get("action") == "retry":
            failed = passback.failures(course.id)
            for row in failed:
                passback.notify(course.id, row.user_id, row.item)
            flash(_("%(n)d failed grades queued again.", n=len(failed)), "ok")
        else:
            passback.notify(course.id)
            flash(_("Every changed grade is queued for the LMS."), "ok")
        return redirect(url_for("lti.passback_page", code=code))
    linked = db.session.scalar(db.select(db.func.count()).select_from(LtiContext)
                               .where(LtiContext.course_id == course.id))
    rows = db.session.execute(
        db.select(passback.LtiGradeSync.state, db.func.count()).join(LtiContext, LtiContext.id == passback.LtiGradeSync.context_id)
        .where(LtiContext.course_id == course.id).group_by(passback.LtiGradeSync.state)).all()
    changes = db.session.execute(
        db.select(LtiRoleChange, User).join(User, User.id == LtiRoleChange.user_id)
        .where(LtiRoleChange.course_id == course.id).order_by(LtiRoleChange.id.desc()).limit(100)).all()
    return render_template("lti/passback.html", course=course, linked=linked, counts=dict(rows),
                           failures=passback.failures(course.id), role_changes=changes,
                           last_sync=schedule.last_sync(course.id), link_code=link_code)
