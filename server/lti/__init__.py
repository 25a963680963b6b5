"""LTI 1.3 / LTI Advantage, distgrade as a tool (PyLTI1p3): OIDC login and launch, the tool's
JWKS, course creation for an unknown context, platform registration (``flask lti register``).
Accounts made by LTI and local accounts coexist: an LTI user is a ``User`` linked by ``LtiUser``."""
from flask import Blueprint

bp = Blueprint("lti", __name__, url_prefix="/lti", cli_group="lti")

from server.lti import models, passback  # noqa: E402,F401  (tables register with the metadata)
from server.lti import admin, cli, dynamic, views  # noqa: E402,F401  (routes and commands register on bp)

__all__ = ["bp"]
