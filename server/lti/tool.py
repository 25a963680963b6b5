"""What a verified launch means in distgrade: the platform's configuration for PyLTI1p3, and the
account, course and role a launch signs in as.

PyLTI1p3 checks the OIDC state, the id_token's signature against the platform's JWKS, its
expiry, audience (client id), deployment and message claims. What it does not do, this module
does: a nonce is used once (PyLTI1p3 keeps it in the session and would accept the same id_token
again), the token's times get a clock-skew leeway (``LTI_CLOCK_LEEWAY_S``), and nothing is created
for a launch that fails any check.

Roles follow the platform: each launch and each roster sync sets the course role from what the
platform says now, down as well as up (``set_role``, audited in ``LtiRoleChange``). Only context
(membership) roles count: a mentor/observer, or a user with institution or system roles alone,
has no membership in the course at all, so no student row, no gradebook line, no statistics.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

import jwt
from flask import current_app
from pylti1p3.contrib.flask import FlaskMessageLaunch
from pylti1p3.exception import LtiException
from pylti1p3.tool_config import ToolConfDict
from sqlalchemy.exc import IntegrityError

from server.extensions import db
from server.lti import keys
from server.lti.models import LtiContext, LtiNonce, LtiPlatform, LtiRoleChange, LtiUser
from server.models import Course, Membership, Role, User, utcnow
from server.roster import ensure_course

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
# context roles, as the part after MEMBERSHIP; any sub-role of Instructor (TeachingAssistant, Grader ...) is staff
STAFF_ROLES = ("#Instructor", "#ContentDeveloper", "#Administrator")
# LTI 1.3 still allows a few simple names for context roles; "Administrator" is left out, since
# alone it cannot be told from an institution's administrator (who gets nothing in a course)
SIMPLE_ROLES = {"Instructor": "#Instructor", "ContentDeveloper": "#ContentDeveloper", "Learner": "#Learner",
                "Mentor": "#Mentor"}


class LaunchRefused(ValueError):
    """A launch distgrade will not act on; ``code`` picks the message. Nothing was changed."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(code)
        self.code, self.detail = code, detail


def tool_conf() -> ToolConfDict:
    """Every registered platform as PyLTI1p3's configuration, with the tool's key pair."""
    platforms = db.session.scalars(db.select(LtiPlatform)).all()
    data: dict[str, list[dict[str, Any]]] = {}
    for p in platforms:
        data.setdefault(p.issuer, []).append({
            "default": not data.get(p.issuer), "client_id": p.client_id, "auth_login_url": p.auth_login_url,
            "auth_token_url": p.auth_token_url, "auth_audience": None, "key_set_url": p.key_set_url,
            "key_set": None, "deployment_ids": list(p.deployment_ids or [])})
    conf = ToolConfDict(data)
    var = current_app.config["VAR_DIR"]
    for p in platforms:
        conf.set_private_key(p.issuer, keys.private_pem(var), client_id=p.client_id)
        conf.set_public_key(p.issuer, keys.public_pem(var), client_id=p.client_id)
    return conf


def register_platform(issuer: str, client_id: str, auth_login_url: str, auth_token_url: str, key_set_url: str,
                      deployment_ids: list[str], deployment_required: bool = True) -> LtiPlatform:
    """Add or update one platform registration (the page, ``flask lti register`` and Dynamic
    Registration call this; the last may come without a deployment, added later on the page)."""
    for name, url in (("login", auth_login_url), ("token", auth_token_url), ("jwks", key_set_url)):
        if not url.startswith(("https://", "http://")):
            raise LaunchRefused("bad_registration", name)
    if not issuer or not client_id or (deployment_required and not any(d.strip() for d in deployment_ids)):
        raise LaunchRefused("bad_registration", "issuer, client id and a deployment id are required")
    row = db.session.scalar(db.select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                         LtiPlatform.client_id == client_id))
    if row is None:
        row = LtiPlatform(issuer=issuer, client_id=client_id)
        db.session.add(row)
    row.auth_login_url, row.auth_token_url, row.key_set_url = auth_login_url, auth_token_url, key_set_url
    row.deployment_ids = sorted({d.strip() for d in deployment_ids if d.strip()})
    db.session.commit()
    return row


def platform_of(launch: dict[str, Any]) -> LtiPlatform:
    aud = launch.get("aud")
    client_id = aud[0] if isinstance(aud, list) else aud
    row = db.session.scalar(db.select(LtiPlatform).where(LtiPlatform.issuer == launch.get("iss"),
                                                         LtiPlatform.client_id == client_id))
    if row is None:  # PyLTI1p3 found it a moment ago: only a concurrent removal gets here
        raise LaunchRefused("unknown_platform")
    return row


class MessageLaunch(FlaskMessageLaunch):
    """PyLTI1p3's launch with a clock-skew leeway on ``iat``/``nbf``/``exp``: an LMS whose clock is
    a few seconds ahead would otherwise have every launch refused ("not yet valid (iat)"). The OIDC
    state is checked by its cookie, unless the tool's own page confirmed it from the platform's
    storage (``frame.confirmed_by_platform_storage``, set as ``state_confirmed``)."""

    state_confirmed = False

    def validate_state(self) -> "MessageLaunch":
        return self if self.state_confirmed else super().validate_state()

    def validate_jwt_signature(self) -> "MessageLaunch":
        public_key, key_alg = self.get_public_key()
        try:
            jwt.decode(self._get_id_token(), public_key, algorithms=[key_alg], options=self._jwt_verify_options,
                       leeway=int(current_app.config.get("LTI_CLOCK_LEEWAY_S", 60)))
        except jwt.InvalidTokenError as err:
            raise LtiException(f"Can't decode id_token: {err}") from err
        return self


def course_role(launch: dict[str, Any]) -> Role | None:
    """The course role the platform gives now: staff (instructor, TA, content developer, course
    administrator) over learner; None for a mentor/observer, or for institution/system roles alone."""
    context = []
    for r in launch.get(CLAIM + "roles", []):
        if isinstance(r, str) and r.startswith(MEMBERSHIP):
            context.append(r[len(MEMBERSHIP):])
        elif isinstance(r, str) and r in SIMPLE_ROLES:
            context.append(SIMPLE_ROLES[r])
    if any(r in STAFF_ROLES or r.startswith("/Instructor#") for r in context):
        return Role.INSTRUCTOR
    if any(r == "#Learner" or r.startswith("/Learner#") for r in context):
        return Role.STUDENT
    return None


def is_instructor(launch: dict[str, Any]) -> bool:
    return course_role(launch) == Role.INSTRUCTOR


def use_nonce(launch: dict[str, Any]) -> None:
    """Record the launch's nonce; a second launch with it is a replay. Flushed, not committed:
    the caller commits it with whatever the launch changes."""
    # an id_token older than a day is refused for its expiry anyway: its nonce need not be kept
    db.session.execute(db.delete(LtiNonce).where(LtiNonce.used_at < utcnow() - timedelta(days=1)))
    db.session.add(LtiNonce(issuer=str(launch.get("iss")), nonce=str(launch.get("nonce"))[:255]))
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        raise LaunchRefused("replayed") from None


def context_course(platform: LtiPlatform, launch: dict[str, Any]) -> Course | None:
    context = launch.get(CLAIM + "context") or {}
    row = db.session.scalar(db.select(LtiContext).where(LtiContext.platform_id == platform.id,
                                                        LtiContext.context_id == str(context.get("id", ""))))
    if row is None:
        return None
    row.services = services(launch) or row.services
    return db.session.get(Course, row.course_id)


def services(launch: dict[str, Any]) -> dict[str, Any]:
    """The service endpoints a launch names: NRPS (roster) and AGS (line items, scopes)."""
    return {k: v for k, v in (("nrps", launch.get("https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice")),
                              ("ags", launch.get("https://purl.imsglobal.org/spec/lti-ags/claim/endpoint")))
            if isinstance(v, dict)}


def create_course(platform: LtiPlatform, launch: dict[str, Any]) -> Course:
    """A new course for the launch's context (an instructor chose to create it)."""
    context = launch.get(CLAIM + "context") or {}
    context_id = str(context.get("id", ""))
    if not context_id:
        raise LaunchRefused("no_context")

    base = "".join(ch for ch in str(context.get("label") or "LTI") if ch.isalnum() or ch in "-_")[:24] or "LTI"
    code = base
    while db.session.scalar(db.select(Course.id).where(Course.code == code)) is not None:
        code = f"{base}-{secrets.token_hex(2)}"
    course = ensure_course(code, str(context.get("title") or code)[:200])  # every homework published, as seeded
    return link_course(platform, launch, course)


def link_course(platform: LtiPlatform, launch: dict[str, Any], course: Course) -> Course:
    """Bind the launch's context (an LMS course) to a distgrade course, new or existing."""
    context_id = str((launch.get(CLAIM + "context") or {}).get("id", ""))
    if not context_id:
        raise LaunchRefused("no_context")
    db.session.add(LtiContext(platform_id=platform.id, context_id=context_id, course_id=course.id,
                              services=services(launch)))
    return course


def account(platform: LtiPlatform, launch: dict[str, Any]) -> User:
    """The account of the launch's user, made on the first launch. Its password is random and
    never shown: an LTI account signs in through its LMS (a local password can be set by an
    administrator with ``flask users set-password``, and then both ways work)."""
    sub = str(launch.get("sub", ""))
    if not sub:
        raise LaunchRefused("no_user")
    link = db.session.scalar(db.select(LtiUser).where(LtiUser.platform_id == platform.id, LtiUser.sub == sub))
    if link is not None:
        user = db.session.get(User, link.user_id)
    else:
        digest = hashlib.sha256(f"{platform.id}:{sub}".encode()).hexdigest()[:12]
        user = User(username=f"lti-{digest}", password_hash="")
        user.set_password(secrets.token_urlsafe(32))
        db.session.add(user)
        db.session.flush()
        db.session.add(LtiUser(platform_id=platform.id, sub=sub, user_id=user.id))
    user.display_name = str(launch.get("name") or user.display_name or "")[:120]
    user.email = str(launch.get("email") or user.email or "")[:200]
    return user


def linked_account(platform: LtiPlatform, sub: str) -> User | None:
    """The account already made for this platform user, if any (an observer gets none made)."""
    link = db.session.scalar(db.select(LtiUser).where(LtiUser.platform_id == platform.id, LtiUser.sub == sub))
    return db.session.get(User, link.user_id) if link else None


def set_role(user: User, course: Course, role: Role | None, source: str) -> bool:
    """Make the user's membership say what the platform says now: ``role``, or no membership at all
    (None). A change is written to ``LtiRoleChange``; returns whether anything changed. Submissions
    are kept when a membership goes (they reappear if the user is a student again)."""
    member = db.session.scalar(db.select(Membership).where(Membership.user_id == user.id,
                                                           Membership.course_id == course.id))
    old, new = (member.role if member else None), (role.value if role else None)
    if old == new:
        return False
    if member is None:
        db.session.add(Membership(user_id=user.id, course_id=course.id, role=new))
    elif new is None:
        db.session.delete(member)
    else:
        member.role = new
    db.session.add(LtiRoleChange(course_id=course.id, user_id=user.id, old=old, new=new, source=source))
    db.session.flush()
    db.session.expire(user, ["memberships"])
    return True
