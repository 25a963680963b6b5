"""Keeping the LMS registrations: what each serves, removing one of its deployments or all of it,
and the configuration Canvas reads from a URL. Removing a registration removes what only made sense
with it (its course links, line items, passback rows, the link of its users to their accounts);
courses, accounts, submissions and grades stay."""
from __future__ import annotations

import secrets
from typing import Any

from flask import url_for

from server.extensions import db
from server.lti.models import LtiContext, LtiPlatform, LtiUser
from server.models import Course
from server.lti.passback import LtiGradeSync, LtiLineItem
from server.lti.frame import RedisCache

SCOPES = ("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
          "https://purl.imsglobal.org/spec/lti-ags/scope/score",
          "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly")


def courses_of(platform_id: int) -> list[Course]:
    """The distgrade courses this registration's LMS courses are linked to."""
    return list(db.session.scalars(db.select(Course).join(LtiContext, LtiContext.course_id == Course.id)
                                   .where(LtiContext.platform_id == platform_id).order_by(Course.code).distinct()))


def remove(platform_id: int, deployment: str | None = None) -> bool:
    """Remove one deployment id (later launches through it are refused) or, without one, the whole
    registration. Returns False if there was nothing to remove."""
    row = db.session.get(LtiPlatform, platform_id)
    if row is None or (deployment is not None and deployment not in (row.deployment_ids or [])):
        return False
    if deployment is not None:
        row.deployment_ids = [d for d in row.deployment_ids if d != deployment]
        db.session.commit()
        return True
    contexts = db.select(LtiContext.id).where(LtiContext.platform_id == platform_id)
    for table in (LtiGradeSync, LtiLineItem):
        db.session.execute(db.delete(table).where(table.context_id.in_(contexts)))
    db.session.execute(db.delete(LtiContext).where(LtiContext.platform_id == platform_id))
    db.session.execute(db.delete(LtiUser).where(LtiUser.platform_id == platform_id))
    db.session.delete(row)
    db.session.commit()
    return True


LINK_CODE_TTL_S = 24 * 3600


def new_link_code(course_id: int) -> str:
    """A one-time code (a day long) that links an LMS course to this course at its instructor's first launch."""
    code = secrets.token_hex(5).upper()
    RedisCache().set("link:" + code, course_id, LINK_CODE_TTL_S)
    return code


def take_link_code(code: str) -> Course | None:
    """The course a link code names, spending the code; None if unknown, used or expired."""
    code = code.strip().upper()
    if not code.isalnum() or len(code) > 20:
        return None
    course_id = RedisCache().take("link:" + code)
    return db.session.get(Course, course_id) if course_id is not None else None


def canvas_config() -> dict[str, Any]:
    """Canvas's developer key JSON (Admin → Developer Keys → + LTI Key → Enter URL): the tool's
    URLs, the services it uses, deep linking from the assignment and link pickers, names and e-mail."""
    launch = url_for("lti.launch", _external=True)
    placements = [{"placement": p, "message_type": "LtiDeepLinkingRequest", "target_link_uri": launch,
                   "text": "distgrade"} for p in ("link_selection", "assignment_selection")]
    return {"title": "distgrade", "description": "Self-test quizzes and autograded homework for distributed training.",
            "oidc_initiation_url": url_for("lti.login", _external=True), "target_link_uri": launch,
            "public_jwk_url": url_for("lti.jwks", _external=True), "scopes": list(SCOPES),
            "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "public",
                            "settings": {"placements": placements}}],
            "custom_fields": {}}
