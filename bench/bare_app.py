"""The baseline for web benchmarks: a bare Flask endpoint, served with the same gunicorn settings."""
from flask import Flask

app = Flask(__name__)


@app.get("/ping")
def ping() -> dict:
    return {"id": 1, "status": "graded", "score": 1.0}
