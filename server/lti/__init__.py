"""LTI 1.3 / LTI Advantage, distgrade as a tool (PyLTI1p3): OIDC login and launch, the tool's
JWKS, course creation for an unknown context, platform registration (``flask lti register``).
Accounts made by LTI and local accounts coexist: an LTI user is a ``User`` linked by ``LtiUser``."""
