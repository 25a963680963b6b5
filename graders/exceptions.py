"""One flat module of the errors graders raise."""
from __future__ import annotations


class GraderError(Exception):
    """Base class for every grader error."""


class AssignmentNotFound(GraderError):
    """No folder of that name under ``assignments/``."""


class SubmissionRejected(GraderError):
    """The upload cannot be graded at all (wrong type, too big, unreadable).

    Carries a bilingual message; rejecting costs the student no attempt.
    """

    def __init__(self, zh: str, en: str):
        super().__init__(en)
        self.message = {"zh": zh, "en": en}


class SandboxSetupError(GraderError):
    """The sandbox could not be built: an infrastructure failure, never the student's."""
