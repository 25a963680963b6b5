"""gunicorn entry point: ``gunicorn server.wsgi:app``."""
import os

from server import create_app

# A request waits at most this long for a Redis that hangs (then Redis is skipped for a few seconds).
app = create_app({"REDIS_TIMEOUT_S": float(os.environ.get("WEB_REDIS_TIMEOUT_S", "1.5"))})
