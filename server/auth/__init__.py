"""Sign-in, sign-out and the language switch."""
from server.auth.views import bp

__all__ = ["bp"]
