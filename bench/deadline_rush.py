"""Deadline rush: queue wait per student for FIFO vs the fair queue, on K simulated GPU slots.

    python -m bench.deadline_rush [--students 200] [--slots 4] [--seed 1] [--durations FILE] [--scale 1]

200 students upload 1-3 times each in the last hour before a deadline (more of them
near the end). Each grading takes a duration drawn from the measured distribution
(``--durations``: a JSON list of seconds, e.g. exported from the submissions table;
the default is what this repository's grader took on the sample submissions here,
times ``--scale``). K slots grade one job each.

The ordering is not re-implemented here: the simulation calls ``server.grading.fairness``
(``fair_order`` with gradings started per student in the last hour, and ``fifo_order``),
the same functions ``server.grading.queue`` feeds from SQL. The fair run also applies the
one-pending-upload rule of ``server.grading.queue.submit`` (a new upload replaces the waiting
one and keeps its place). Printed: per-student mean wait, p50/p95 across students,
the worst student, jobs graded, and when the last result came out.
"""
from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from server.grading.fairness import Waiting, fair_order, fifo_order, percentile

# Seconds per grading measured on this repository's dev machine (2 shared cores, fast mode):
# ddp_speedup samples through the real CLI (correct, buggy, crashing, hanging scripts).
MEASURED_S = [22.8, 21.9, 24.6, 23.3, 25.1, 38.5, 20.7, 22.2, 44.0, 23.9, 12.4, 9.8]
WINDOW_S = 3600.0


@dataclass
class Upload:
    id: int
    student: int
    arrival: float
    duration: float
    since: float = 0.0
    start: float | None = None
    replaced: bool = False


@dataclass
class Result:
    name: str
    per_student: dict[int, float] = field(default_factory=dict)
    graded: int = 0
    replaced: int = 0
    last_result: float = 0.0


def make_uploads(students: int, seed: int, durations: list[float]) -> list[Upload]:
    """1-3 uploads per student in the last hour, denser towards the deadline (t = 3600 * sqrt(u))."""
    rng = random.Random(seed)
    uploads: list[Upload] = []
    for s in range(students):
        times = sorted(WINDOW_S * rng.random() ** 0.5 for _ in range(rng.choice((1, 2, 3))))
        for t in times:
            uploads.append(Upload(len(uploads), s, t, rng.choice(durations)))
    uploads.sort(key=lambda u: (u.arrival, u.id))
    return uploads


def simulate(uploads: list[Upload], slots: int, fair: bool) -> Result:
    """Discrete-event run of one policy; returns the waits of graded uploads per student."""
    ups = [Upload(u.id, u.student, u.arrival, u.duration, u.arrival) for u in uploads]
    by_id = {u.id: u for u in ups}
    waiting: dict[int, Upload] = {}
    started_at: list[tuple[float, int]] = []  # (time, student) of every grading started
    free, now, i = slots, 0.0, 0
    running: list[tuple[float, int]] = []  # heap of (end time, upload id)
    res = Result("fair queue" if fair else "FIFO")
    while i < len(ups) or waiting or running:
        next_arrival = ups[i].arrival if i < len(ups) else float("inf")
        next_end = running[0][0] if running else float("inf")
        if next_end <= next_arrival:
            now, _ = heapq.heappop(running)
            free += 1
            res.last_result = now
        else:
            now, u = next_arrival, ups[i]
            i += 1
            if fair:  # one pending upload per student: the new one replaces the waiting one, keeps its place
                old = next((w for w in waiting.values() if w.student == u.student), None)
                if old is not None:
                    old.replaced = True
                    u.since = old.since
                    del waiting[old.id]
                    res.replaced += 1
            waiting[u.id] = u
        while free and waiting:
            if fair:
                recent: dict[int, int] = {}
                for t, s in started_at:
                    if now - t <= WINDOW_S:
                        recent[s] = recent.get(s, 0) + 1
                order = fair_order([Waiting(w.id, w.student, w.since) for w in waiting.values()], recent)
            else:
                order = fifo_order([Waiting(w.id, w.student, w.since) for w in waiting.values()])
            u = by_id[order[0].id]
            del waiting[u.id]
            u.start = now
            started_at.append((now, u.student))
            heapq.heappush(running, (now + u.duration, u.id))
            free -= 1
            res.graded += 1
    waits: dict[int, list[float]] = {}
    for u in ups:
        if u.start is not None:
            waits.setdefault(u.student, []).append(u.start - u.arrival)
    res.per_student = {s: statistics.fmean(w) for s, w in waits.items()}
    return res


def table(results: list[Result], slots: int, students: int, uploads: int) -> str:
    """The comparison as a fixed-width table (minutes)."""
    lines = [f"{students} students, {uploads} uploads in the last hour, {slots} GPU slots",
             f"{'policy':<12}{'graded':>8}{'replaced':>10}{'p50 wait':>10}{'p95 wait':>10}{'worst':>9}{'last result':>13}",
             "-" * 72]
    for r in results:
        w = list(r.per_student.values())
        lines.append(f"{r.name:<12}{r.graded:>8}{r.replaced:>10}{percentile(w, 50) / 60:>9.1f}m"
                     f"{percentile(w, 95) / 60:>9.1f}m{max(w) / 60:>8.1f}m{r.last_result / 60:>12.1f}m")
    lines.append("wait: per student, the mean over that student's graded uploads of (start - upload); "
                 "percentiles across students")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(prog="python -m bench.deadline_rush")
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--durations", type=Path, help="JSON list of grading durations in seconds")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every duration (GPU runs are longer)")
    args = p.parse_args(argv)
    durations = json.loads(args.durations.read_text()) if args.durations else MEASURED_S
    durations = [float(d) * args.scale for d in durations if float(d) > 0]
    uploads = make_uploads(args.students, args.seed, durations)
    out = table([simulate(uploads, args.slots, fair=False), simulate(uploads, args.slots, fair=True)],
                args.slots, args.students, len(uploads))
    print(out)
    return out


if __name__ == "__main__":
    main()
