"""Names and Role Provisioning: bring an LMS course's roster into its distgrade course before
anyone launches. Members get the same accounts a launch would make (``LtiUser`` by ``sub``) and
the platform's role; members who left are kept (their work and grades stay), as in the CSV import."""
from __future__ import annotations

from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector

from server.extensions import db
from server.lti import tool
from server.lti.models import LtiContext, LtiPlatform
from server.models import Course


def sync(course_id: int) -> dict[str, int]:
    """Fetch every linked context's members (real HTTP) and enrol them; returns counts by role."""
    counts = {"instructor": 0, "student": 0, "inactive": 0}
    course = db.session.get(Course, course_id)
    conf = tool.tool_conf()
    for ctx in db.session.scalars(db.select(LtiContext).where(LtiContext.course_id == course_id)):
        nrps = (ctx.services or {}).get("nrps")
        if not nrps:
            continue
        platform = db.session.get(LtiPlatform, ctx.platform_id)
        registration = conf.find_registration_by_params(platform.issuer, platform.client_id)
        members = NamesRolesProvisioningService(ServiceConnector(registration), nrps).get_members()
        for m in members:
            if str(m.get("status", "Active")) != "Active" or not m.get("user_id"):
                counts["inactive"] += 1
                continue
            person = {"sub": m["user_id"], "name": m.get("name"), "email": m.get("email"),
                      tool.CLAIM + "roles": m.get("roles", [])}
            user = tool.account(platform, person)
            role = tool.enrol(user, course, tool.is_instructor(person))
            counts[role.value] += 1
    db.session.commit()
    return counts
