"""The gradebook, statistics and exports give the same numbers on PostgreSQL as on SQLite.

The same generated class (fixed seed) is built on both; the aggregate SQL (CASE over datetimes,
GROUP BY, the manual-points subquery) must agree cell by cell.
"""
from __future__ import annotations

import pytest

from tests.server.test_postgres import postgres_url  # noqa: F401  (module-scoped server fixture)


def _snapshot(url: str) -> dict:
    from flask_migrate import upgrade

    from bench.seed_gradebook import seed_class
    from server import create_app
    from server.dashboard import exports, stats
    from server.scores.gradebook import build_gradebook
    from server.extensions import db
    from server.models import Course

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SQLALCHEMY_ENGINE_OPTIONS": {}, "REDIS_URL": "",
                      "SECRET_KEY": "test-only-secret-key-0123456789"})
    with app.app_context():
        upgrade()
        app.test_cli_runner().invoke(args=["seed-demo"])
        seed_class(60, reports=True)
        course = db.session.scalar(db.select(Course).where(Course.code == "BENCH"))
        book = build_gradebook(course)
        cells = {(r.username, k): (c.score, c.attempts, c.late, c.overridden)
                 for r in book.rows for k, c in r.cells.items()}
        hs = stats.homework_stats(course.id, "bench_hw01")
        qs = stats.quiz_question_stats(course.id, "ch7_3_graded", [], "en")
        return {"cells": cells, "totals": {r.username: r.total for r in book.rows},
                "checks": {c.check_id: (len(c.failing), c.failing_all) for c in hs.checks},
                "quiz": {q.question_id: (q.answers, q.facility, q.discrimination) for q in qs},
                "canvas_rows": len(exports.canvas_csv(book).splitlines())}


def test_postgres_matches_sqlite(postgres_url, tmp_path):  # noqa: F811
    pytest.importorskip("psycopg")
    pg = _snapshot(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    lite = _snapshot(f"sqlite:///{tmp_path / 'lite.db'}")
    assert len(pg["cells"]) > 500
    assert pg == lite
