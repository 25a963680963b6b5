"""A minimal instructor area: roster import and each homework's submissions (the dashboard comes later)."""
from server.instructor.views import bp

__all__ = ["bp"]
