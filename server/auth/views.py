"""Login with a username and password, logout by POST, and a remembered language choice.

Every page except the login page needs a signed-in user: ``require_login`` runs
before each request of every blueprint, so a new page cannot forget it.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import refresh
from flask_limiter.util import get_remote_address
from flask_login import current_user, login_required, login_user, logout_user
from sqlalchemy import bindparam, select, update

from server.auth import devices, throttle
from server.auth.forms import LoginForm, PasswordForm
from server.auth.throttle import account_name
from server.extensions import db
from server.models import User

bp = Blueprint("auth", __name__)

# Endpoints reachable without signing in: the login page itself and static files.
# LTI: the LMS reaches these before anyone is signed in (each verifies the launch itself)
PUBLIC_ENDPOINTS = {"auth.login", "auth.set_language", "static", "lti.login", "lti.launch", "lti.jwks",
                    "lti.create_course", "lti.canvas_json", "lti.dynamic_register"}


@bp.record_once
def _translate_login_prompt(state) -> None:
    # Flask-Login flashes this when it redirects to the login page; make it follow the locale.
    state.app.login_manager.login_message = _l("Please sign in to see this page.")
    state.app.login_manager.login_message_category = "info"



def session_user_id() -> str | None:
    """The signed-in user's id from the signed session cookie, without loading the user.

    Only meaningful after ``require_login`` has checked the session is current (it runs first).
    """
    return session.get("_user_id")


# Built once: one primary-key lookup of one integer column, no ORM instance.
_SESSION_VERSION = select(User.__table__.c.session_version).where(User.__table__.c.id == bindparam("uid"))


def session_is_current() -> bool:
    """The session names a user and began at their current session version (not revoked since).

    The check of the paths that skip loading the user: one indexed query, no cache, so a logout
    or a password change takes effect on the very next request in every process.
    """
    uid, version = session.get("_user_id"), session.get("_sv")
    if uid is None or version is None:
        return False
    try:
        uid = int(uid)
    except (TypeError, ValueError):
        return False
    return db.session.connection().execute(_SESSION_VERSION, {"uid": uid}).scalar() == version


def session_auth(view):
    """Authorise a hot endpoint from the signed session cookie alone, without loading the user.

    For endpoints hit many times a minute by every student (the status poll, the quiz page and
    its answers): each such view must check ownership in its own query, by ``session_user_id``.
    """
    view.session_auth = True
    return view


def checks_session_version(view):
    """Mark a view that checks the session version in its own query (``session["_sv"]``), so
    ``require_login`` only checks that the session names a user and a version."""
    view.checks_session_version = True
    return view


def _session_is_plausible() -> bool:
    uid, version = session.get("_user_id"), session.get("_sv")
    return isinstance(version, int) and isinstance(uid, str) and uid.isdigit()


@bp.before_app_request
def require_login():
    """Send anonymous visitors of any page but the public ones to the login page.

    JSON API calls get 401 instead of a redirect. API calls and ``session_auth`` views are
    authorised from the signed session cookie alone (its user id) and check ownership or course
    role in their own query, so the busiest requests skip loading the user object.
    """
    if request.endpoint in PUBLIC_ENDPOINTS or request.endpoint is None:
        return None
    if request.blueprint == "api":
        if getattr(current_app.view_functions[request.endpoint], "checks_session_version", False):
            current = _session_is_plausible()
        else:
            current = session_is_current()
        return None if current else ({"error": "login required"}, 401)
    view = current_app.view_functions[request.endpoint]
    if getattr(view, "session_auth", False) and (_session_is_plausible() if getattr(view, "checks_session_version", False)
                                                 else session_is_current()):
        return None
    if current_user.is_authenticated:
        return None
    return current_app.login_manager.unauthorized()


def safe_next(target: str | None) -> str:
    """Only follow a ``next`` that stays on this site (no open redirect)."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and target.startswith("/") and not target.startswith("//"):
            return target
    return url_for("homework.index")


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Show the login form; on success remember the user's language and go where they were headed."""
    if current_user.is_authenticated:
        return redirect(safe_next(request.args.get("next")))
    form = LoginForm()
    if form.validate_on_submit():
        waiting = throttle.gate()  # over the limit: the account's turn, before the password is checked
        if waiting is not None:
            return waiting
        user = db.session.scalar(db.select(User).where(User.username == form.username.data.strip()))
        if user is not None and user.check_password(form.password.data):
            throttle.signed_in_ok()
            login_user(user)
            session["_sv"] = user.session_version  # revoked when logout or a new password bumps it
            if session.get("lang") and user.locale != session["lang"]:
                user.locale = session["lang"]  # chosen on the login page: keep it for next time
                db.session.commit()
            elif user.locale:
                session["lang"] = user.locale
            refresh()
            _tell_owner(devices.signed_in(account_name(), get_remote_address() or "-"))
            response = redirect(safe_next(request.args.get("next")))
            devices.remember(response, account_name())  # a known browser from now on
            return response
        if user is not None:
            devices.failed(account_name())  # told to the owner at their next sign-in
        throttle.count_failure()
        flash(_("Wrong username or password."), "error")
    elif request.method == "POST":
        flash(_("Enter your username and password."), "error")
    return render_template("auth/login.html", form=form), (401 if request.method == "POST" else 200)


def _tell_owner(failed: int) -> None:
    """Say how many wrong passwords were tried since the last sign-in (someone may be guessing)."""
    if failed:
        flash(_("%(n)d failed sign-in attempts for your account since your last sign-in. If that was not "
                "you, change your password.", n=failed), "info")


@bp.route("/logout", methods=["POST"])
@login_required
def logout():
    """Sign out (POST only, so a link on another site cannot sign anyone out).

    Bumping the session version ends this session everywhere it was copied to (a cookie replayed
    after logout is refused), and the user's sessions on other devices with it.
    """
    db.session.execute(update(User).where(User.id == current_user.id)
                       .values(session_version=User.session_version + 1))
    db.session.commit()
    logout_user()
    session.pop("_sv", None)
    flash(_("You are signed out."), "info")
    return redirect(url_for("auth.login"))


@bp.route("/password", methods=["GET", "POST"])
@login_required
def password():
    """Change one's own password: this browser stays signed in, every other session ends.

    Wrong current passwords are throttled like sign-ins (``throttle``), so a borrowed session
    cannot be used to guess the password either.
    """
    form = PasswordForm()
    status = 200
    if form.validate_on_submit():
        waiting = throttle.gate()
        if waiting is not None:
            return waiting
        if current_user.check_password(form.current.data):
            current_user.set_password(form.new.data)  # bumps the session version
            db.session.commit()
            session["_sv"] = current_user.session_version
            flash(_("Password changed. Every other session of this account is signed out."), "info")
            return redirect(url_for("homework.index"))
        throttle.count_failure()
        flash(_("The current password is wrong."), "error")
        status = 401
    elif request.method == "POST":
        flash(_("The new password needs at least 8 characters, typed the same twice."), "error")
        status = 400
    return render_template("auth/password.html", form=form), status


@bp.route("/lang", methods=["POST"])
def set_language():
    """Switch the interface language for this browser and, when signed in, for the account."""
    lang = request.form.get("lang")
    if lang in current_app.config["LANGUAGES"]:
        session["lang"] = lang
        if current_user.is_authenticated:
            current_user.locale = lang
            db.session.commit()
        refresh()
    return redirect(safe_next(request.form.get("next")))
