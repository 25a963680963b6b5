"""gunicorn entry point: ``gunicorn server.wsgi:app``."""
from server import create_app

app = create_app()
