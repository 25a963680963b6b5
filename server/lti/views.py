"""LTI 1.3 endpoints: OIDC login initiation, the launch, the tool's JWKS, and creating a course
for an unknown context. Launch state (OIDC state, nonce, launch data) lives in Redis, not in the
session cookie: the launch is a cross-site POST from the LMS, often inside its frame, where
cookies may not come back (``server.lti.frame``)."""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from flask import Blueprint, abort, current_app, make_response, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_login import login_user, logout_user
from pylti1p3.contrib.flask import FlaskOIDCLogin
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.lineitem import LineItem

from server.extensions import csrf, db
from server.lti import frame, keys, passback, registry, tool
from coursework.text import pick
from server.scores.gradebook import build_gradebook
from server.access import course_or_404

bp = Blueprint("lti", __name__, url_prefix="/lti", cli_group="lti")


def _messages() -> dict[str, str]:
    return {"invalid": _("The launch could not be verified (its signature, expiry, audience, state or nonce is wrong)."),
            "replayed": _("This launch was already used. Open the tool again from your course in the LMS."),
            "unknown_deployment": _("This LMS deployment is not registered with distgrade. Ask the administrator to add its deployment id."),
            "unknown_platform": _("This LMS is not registered with distgrade."),
            "unknown_course": _("This course is not set up in distgrade yet. Ask your instructor to open the tool once from the course."),
            "no_context": _("The launch names no course."),
            "no_user": _("The launch names no user."),
            "expired_launch": _("The launch has expired. Open the tool again from your course in the LMS."),
            "bad_registration": _("The registration is incomplete or a URL is not http(s)."),
            "bad_link_code": _("This link code is unknown, used or expired. Ask the distgrade course's instructor for a new one."),
            "no_cookies": _("Your browser did not send distgrade's cookies back inside the LMS page, so this launch cannot be checked. Open distgrade in a new window.")}


def refused(code: str, detail: str = "", status: int = 400, new_window: str = ""):
    """A clear error page for a refused launch; nothing was created or changed."""
    db.session.rollback()
    return render_template("lti/refused.html", message=_messages()[code], detail=detail, code=code,
                           new_window=new_window), status


def _storage():
    return frame.storage()


@bp.route("/login", methods=["GET", "POST"])
@csrf.exempt
def login():
    """OIDC third-party initiated login: to the platform's authorisation endpoint. In a frame (or
    with platform storage offered) through a page that first puts the state into the platform's
    storage, or checks that cookies stick and else offers a new window (``server.lti.frame``)."""
    req = frame.ToolRequest()
    cookies = frame.ToolCookies(req)
    try:
        oidc = FlaskOIDCLogin(req, tool.tool_conf(), cookie_service=cookies, launch_data_storage=_storage())
        target = oidc.disable_check_cookies().get_redirect_object(url_for("lti.launch", _external=True))
    except (LtiException, OIDCException) as err:
        return refused("unknown_platform", str(err))
    except Exception as err:  # noqa: BLE001  PyLTI1p3's config raises a plain Exception for an unknown issuer
        if not any(m in str(err) for m in ("Config is not set", "not found in settings")):
            raise
        return refused("unknown_platform", str(err))
    auth_url = target.get_redirect_url()
    state = parse_qs(urlparse(auth_url).query).get("state", [""])[0]
    storage_target = str(request.values.get("lti_storage_target", ""))
    platform_origin = frame.origin(oidc._registration.get_auth_login_url())
    params = frame.remember_login(state, storage_target, platform_origin)
    if not storage_target and request.headers.get("Sec-Fetch-Dest") != "iframe":
        return target.do_redirect()  # a window of its own: its cookies work, straight on
    page = make_response(render_template(
        "lti/login.html", auth_url=auth_url, state=state, storage_target=storage_target,
        platform_origin=platform_origin, new_window=url_for("lti.login", **params)))
    cookies.update_response(page)
    return page


def _target(launch: dict[str, Any], course) -> str:
    """Where a resource launch lands: the placed homework or quiz (custom ``item``), else the course's homework."""
    item = str((launch.get(tool.CLAIM + "custom") or {}).get("item", ""))
    kind, _sep, ref = item.partition(":")
    if kind == "hw" and ref:
        return url_for("homework.assignment", code=course.code, assignment_id=ref)
    if kind == "quiz" and ref:
        return url_for("quiz.overview", quiz_id=ref)
    return url_for("homework.index")


@bp.post("/launch")
@csrf.exempt
def launch():
    """Verify the id_token (PyLTI1p3), use its nonce once, then sign the user in to the right
    course with the platform's role. An unknown course: an instructor may create it. No course
    role (an observer, an institution role alone): no membership and a page that says so."""
    req = frame.ToolRequest()
    message = tool.MessageLaunch(req, tool.tool_conf(), cookie_service=frame.ToolCookies(req),
                                 launch_data_storage=_storage())
    state = str(request.form.get("state", ""))
    message.state_confirmed = frame.confirmed_by_platform_storage(state)
    try:
        data = message.get_launch_data()
    except LtiException as err:
        detail = str(err)
        record = frame.login_record(state) if "state" in detail.lower() else None
        if record and record.get("target"):  # no cookie: the platform's storage holds the state
            return render_template("lti/storage_check.html", id_token=request.form.get("id_token", ""), state=state,
                                   storage_target=record["target"], platform_origin=record["origin"])
        if record:
            return refused("no_cookies", detail, new_window=url_for("lti.login", **record["params"]))
        return refused("unknown_deployment" if "deployment" in detail.lower() else "invalid", detail)
    except Exception as err:  # noqa: BLE001  PyLTI1p3's config raises a plain Exception for an unknown client id
        if "not found in settings" not in str(err):
            raise
        return refused("invalid", str(err))
    try:
        tool.use_nonce(data)
        platform = tool.platform_of(data)
        course = tool.context_course(platform, data)
        if course is None:
            if not tool.is_instructor(data):
                raise tool.LaunchRefused("unknown_course")
            db.session.commit()  # the nonce: this id_token is spent even if nobody creates the course
            session["lti_pending"] = message.get_launch_id()
            context = data.get(tool.CLAIM + "context") or {}
            return render_template("lti/create_course.html", context=context, launch_id=message.get_launch_id())
        if tool.course_role(data) is None:
            return _no_role(platform, data, course)
        return _sign_in(platform, data, course, message)
    except tool.LaunchRefused as err:
        return refused(err.code, err.detail)


def _no_role(platform, data: dict[str, Any], course):
    """A mentor/observer or an institution-only role: any membership they had goes (audited), no
    account is made, nobody stays signed in in this browser; the page says where grades are."""
    user = tool.linked_account(platform, str(data.get("sub", "")))
    if user is not None:
        tool.set_role(user, course, None, "launch")
    db.session.commit()
    logout_user()
    session.pop("_sv", None)
    return render_template("lti/no_role.html", course=course)


def _sign_in(platform, data: dict[str, Any], course, message):
    user = tool.account(platform, data)
    tool.set_role(user, course, tool.course_role(data), "launch")
    ags = tool.services(data).get("ags") or {}
    item = str((data.get(tool.CLAIM + "custom") or {}).get("item", ""))
    if item and isinstance(ags.get("lineitem"), str):
        passback.link_lineitem(platform.id, str((data.get(tool.CLAIM + "context") or {}).get("id", "")),
                               item, ags["lineitem"])
    db.session.commit()
    login_user(user)
    session["_sv"] = user.session_version
    if message.is_deep_link_launch() and tool.is_instructor(data):
        session["lti_deep_link"] = message.get_launch_id()
        return redirect(url_for("lti.deep_link", code=course.code))
    return redirect(_target(data, course))


@bp.route("/<code>/deep-link", methods=["GET", "POST"])
def deep_link(code: str):
    """Deep Linking: the instructor picks a homework or quiz; the signed reply (the tool's key)
    places it in the LMS with its line item (tag = the gradebook's item key, maximum = its points),
    which the grade passback then finds and reuses."""
    course = course_or_404(code, instructor=True)
    launch_id = session.get("lti_deep_link")
    if not launch_id:
        return refused("expired_launch")
    try:
        message = tool.MessageLaunch.from_cache(launch_id, frame.ToolRequest(), tool.tool_conf(),
                                                launch_data_storage=_storage())
    except LtiException:
        return refused("expired_launch")
    items = {i.key: i for i in build_gradebook(course).items}
    if request.method == "GET":
        return render_template("lti/deep_link.html", course=course, items=list(items.values()))
    chosen = [items[k] for k in request.form.getlist("item") if k in items]
    if not chosen:
        return render_template("lti/deep_link.html", course=course, items=list(items.values()),
                               error=_("Choose at least one homework or quiz.")), 400
    if len(chosen) > 1 and (data_settings(message) or {}).get("accept_multiple") is False:
        return render_template("lti/deep_link.html", course=course, items=list(items.values()),
                               error=_("This place in the LMS takes only one item: choose one.")), 400
    resources = [DeepLinkResource().set_url(url_for("lti.launch", _external=True)).set_title(pick(i.title, "en") or i.ref)
                 .set_custom_params({"item": i.key})
                 .set_lineitem(LineItem().set_tag(i.key).set_resource_id(i.key).set_score_maximum(i.max_score)
                               .set_label(pick(i.title, "en") or i.ref)) for i in chosen]
    session.pop("lti_deep_link", None)
    deep = message.get_deep_link()
    # PyLTI1p3's own form puts the platform's return URL into the HTML unescaped: escaped here
    return_url = (data_settings(message) or {}).get("deep_link_return_url", "")
    return render_template("lti/deep_link_post.html", action=return_url, jwt=deep.get_response_jwt(resources))


def data_settings(message) -> dict:
    return message.get_launch_data().get("https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings") or {}


@bp.post("/create-course")
@csrf.exempt  # the form carries the launch id, which only the instructor's own launch revealed
def create_course():
    """Create the course an instructor's launch named, or link it to an existing one (a link code
    from that course's instructor), and sign them in as its instructor."""
    launch_id = request.form.get("launch_id", "")
    if not launch_id or session.get("lti_pending") != launch_id:
        return refused("expired_launch")
    try:
        message = tool.MessageLaunch.from_cache(launch_id, frame.ToolRequest(), tool.tool_conf(),
                                                launch_data_storage=_storage())
    except LtiException:
        return refused("expired_launch")
    data = message.get_launch_data()
    if not tool.is_instructor(data):
        abort(404)
    try:
        platform = tool.platform_of(data)
        course = tool.context_course(platform, data)
        if course is None and request.form.get("link_code", "").strip():
            existing = registry.take_link_code(request.form["link_code"])
            if existing is None:
                raise tool.LaunchRefused("bad_link_code")
            course = tool.link_course(platform, data, existing)
        course = course or tool.create_course(platform, data)
        session.pop("lti_pending", None)
        return _sign_in(platform, data, course, message)
    except tool.LaunchRefused as err:
        return refused(err.code, err.detail)


@bp.route("/canvas.json")
def canvas_json():
    """Canvas's configuration URL (a developer key "Enter URL"): nothing secret in it."""
    return registry.canvas_config()


@bp.route("/jwks.json")
def jwks():
    """The tool's public key set (the platform verifies the tool's messages and token requests)."""
    return keys.jwks(current_app.config["VAR_DIR"]), 200, {"Cache-Control": "public, max-age=3600"}
