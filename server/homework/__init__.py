"""Student pages: homework list, assignment spec and upload, submission status and report."""
from server.homework.views import bp

__all__ = ["bp"]
