"""One flat module of the errors graders raise (content errors are in ``coursework.exceptions``)."""
from __future__ import annotations


class GraderError(Exception):
    """Base class for every grader error."""


class InfrastructureError(GraderError):
    """The grading host failed the run (not the student, not the grader's code): retried, no attempt used."""


class SandboxSetupError(InfrastructureError):
    """The sandbox could not be built: an infrastructure failure, never the student's."""
