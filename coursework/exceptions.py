"""The errors about course content and uploads, raised on both sides (web app and worker)."""
from __future__ import annotations


class CourseworkError(Exception):
    """Base class for every coursework error."""


class AssignmentNotFound(CourseworkError):
    """No folder of that name under ``assignments/``."""


class SubmissionRejected(CourseworkError):
    """The upload cannot be graded at all (wrong type, too big, unreadable).

    Carries a bilingual message; rejecting costs the student no attempt.
    """

    def __init__(self, zh: str, en: str):
        super().__init__(en)
        self.message = {"zh": zh, "en": en}
