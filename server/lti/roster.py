"""Names and Role Provisioning: bring an LMS course's roster into its distgrade course before
anyone launches. Members get the same accounts a launch would make (``LtiUser`` by ``sub``) and the
role the roster gives them now, down as well as up (``tool.set_role``, audited). A mentor/observer
gets no account and loses any membership. Students who left are kept (their work and grades stay),
as in the CSV import; staff who left lose the staff role, so a removed TA's hand can no longer
change a grade that flows to the LMS."""
from __future__ import annotations

from typing import Any

from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector

from server.extensions import db
from server.lti import tool
from server.lti.models import LtiContext, LtiPlatform, LtiUser
from server.models import Course, Membership, Role, User

_RANK = {None: 0, Role.STUDENT: 1, Role.INSTRUCTOR: 2}
Member = tuple[LtiPlatform, dict[str, Any], "Role | None"]


def _members(course_id: int) -> tuple[dict[tuple[int, str], Member], set[int], int]:
    """Every linked context's active members (real HTTP), by (platform, sub), with the highest role
    any context gives; the platforms whose rosters were read; how many members were inactive."""
    conf = tool.tool_conf()
    seen: dict[tuple[int, str], Member] = {}
    fetched, inactive = set(), 0
    for ctx in db.session.scalars(db.select(LtiContext).where(LtiContext.course_id == course_id)):
        nrps = (ctx.services or {}).get("nrps")
        if not nrps:
            continue
        platform = db.session.get(LtiPlatform, ctx.platform_id)
        registration = conf.find_registration_by_params(platform.issuer, platform.client_id)
        for m in NamesRolesProvisioningService(ServiceConnector(registration), nrps).get_members():
            if str(m.get("status", "Active")) != "Active" or not m.get("user_id"):
                inactive += 1
                continue
            person = {"sub": str(m["user_id"]), "name": m.get("name"), "email": m.get("email"),
                      tool.CLAIM + "roles": m.get("roles", [])}
            role = tool.course_role(person)
            key = (platform.id, person["sub"])
            if key not in seen or _RANK[role] > _RANK[seen[key][2]]:
                seen[key] = (platform, person, role)
        fetched.add(platform.id)
    return seen, fetched, inactive


def sync(course_id: int) -> dict[str, int]:
    """Read the linked contexts' rosters and set every member's role; returns counts (instructor,
    student, observer, inactive, removed: staff who are no longer on the roster)."""
    course = db.session.get(Course, course_id)
    seen, fetched, inactive = _members(course_id)
    counts = {"instructor": 0, "student": 0, "observer": 0, "inactive": inactive, "removed": 0}
    for platform, person, role in seen.values():
        if role is None:
            counts["observer"] += 1
            user = tool.linked_account(platform, person["sub"])
        else:
            counts[role.value] += 1
            user = tool.account(platform, person)
        if user is not None:
            tool.set_role(user, course, role, "roster")
    if seen:  # an empty roster is the LMS failing to answer, not a course without staff
        staff = db.session.execute(
            db.select(User, LtiUser.platform_id, LtiUser.sub).join(LtiUser, LtiUser.user_id == User.id)
            .join(Membership, Membership.user_id == User.id)
            .where(Membership.course_id == course_id, Membership.role == Role.INSTRUCTOR.value,
                   LtiUser.platform_id.in_(fetched))).all()
        for user, platform_id, sub in staff:
            if (platform_id, sub) not in seen and tool.set_role(user, course, None, "roster"):
                counts["removed"] += 1
    db.session.commit()
    return counts
