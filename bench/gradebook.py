"""Gradebook server time at 1k / 2k / 4k / 8k students x 12 items (goal: < 300 ms at 2k, linear growth).

For each size a fresh SQLite database is migrated and filled by ``bench.seed_gradebook``; then,
in-process (server time only, no network): ``build_gradebook`` alone, the gradebook page as the
instructor gets it (GET /dashboard/BENCH/, first page of 100 rows, sorted by total), and the
Canvas CSV of the whole class. Each is the median of ``BENCH_REPEATS`` runs, plus the number of
SQL statements per page (constant if nothing loops per student).

Run: ``.venv/bin/python -m bench.gradebook`` (``BENCH_SIZES=1000,2000`` to choose sizes).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import event

from bench.common import print_table
from bench.seed_gradebook import make_app, seed_class

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "1000,2000,4000,8000").split(",")]
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))


def timed(fn, repeats: int = REPEATS) -> tuple[float, float, float]:
    """Median wall, median CPU and best CPU time of ``fn()`` in ms, after one warm-up run.

    CPU time is this process's own (SQLite runs in-process), so it stays honest on a machine
    whose cores are shared with other jobs; wall time is what a user would wait there.
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), statistics.median(cpu), min(cpu)


def measure(students: int, tmp: Path) -> list[object]:
    app = make_app(str(tmp / f"gb{students}.db"))
    from server.scores.gradebook import build_gradebook
    from server.extensions import db
    from server.models import Course

    with app.app_context():
        counts = seed_class(students)
        course = db.session.get(Course, counts["course_id"])
        items = len(build_gradebook(course).items)
        build_ms = timed(lambda: build_gradebook(course))
    client = app.test_client()
    client.post("/login", data={"username": "teacher", "password": "teacher-pass"})

    def get(url: str) -> None:
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        r.get_data()

    page_ms = timed(lambda: get("/dashboard/BENCH/?sort=total&desc=1&lang=en"))
    csv_ms = timed(lambda: get("/dashboard/BENCH/export/canvas.csv"), repeats=3)
    statements = [0]
    with app.app_context():
        def count(*_a):
            statements[0] += 1
        event.listen(db.engine, "before_cursor_execute", count)
        get("/dashboard/BENCH/?sort=total&desc=1&lang=en")
        event.remove(db.engine, "before_cursor_execute", count)
    return [students, items, counts["submissions"], counts["quiz_attempts"], build_ms[1], *page_ms, csv_ms[1],
            page_ms[2] / students * 1000, statements[0]]


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-gradebook-") as tmp:
        for n in SIZES:
            rows.append(measure(n, Path(tmp)))
            print(f"  {n} students done", flush=True)
    print_table("Gradebook server time (median ms; SQLite, in-process)",
                ["students", "items", "submissions", "attempts", "build_cpu", "page_wall", "page_cpu", "page_cpu_best",
                 "csv_cpu", "best_us/student", "sql_statements"], rows)
    at_2k = next((r for r in rows if r[0] == 2000), None)
    if at_2k:
        print(f"goal: page < 300 ms at 2,000 students -> wall {at_2k[5]:.1f} ms, CPU {at_2k[6]:.1f} ms, "
              f"best {at_2k[7]:.1f} ms ({'met' if at_2k[6] < 300 else 'MISSED'} on median CPU time)")
    if len(rows) > 1:
        growth = rows[-1][7] / rows[0][7]
        print(f"growth: best page CPU time x{growth:.2f} for students x{rows[-1][0] / rows[0][0]:.0f} "
              f"(linear would be x{rows[-1][0] / rows[0][0]:.0f})")


if __name__ == "__main__":
    main()
