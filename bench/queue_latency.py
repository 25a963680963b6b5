"""Enqueue -> job start latency through a real redis-server and a real RQ worker.

Uses the production queue names and Worker class (``GradingWorker``: one fork per job, the horse
dies with the worker), as in service. Goal: p50 <= 50 ms.  Run: ``.venv/bin/python -m bench.queue_latency``.

This is RQ's part only (enqueue -> the job's first line, 14-15 ms p50 on the shared 2-core host).
A grading's start as the student sees it adds the job's ``claim`` committed in the forked horse:
about 35 ms p50 there in all (``server.grading.worker.warm_up_job_start`` says what it cost before).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import redis
from rq import Queue

from bench.common import percentile, print_table, redis_server
from server.grading.queue import queue_name

N = int(os.environ.get("BENCH_JOBS", "200"))


def mark_started(enqueued_at: float, key: str) -> None:
    """The job body: record how long after enqueueing it began."""
    redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]).rpush(key, time.time() - enqueued_at)


def main() -> int:
    with redis_server() as url:
        env = dict(os.environ, BENCH_REDIS_URL=url)
        # Like server.grading.worker, the worker process imports the job module before it forks work horses.
        worker = subprocess.Popen([sys.executable, "-m", "bench.queue_latency", "--worker", url], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conn = redis.Redis.from_url(url)
            q = Queue(queue_name("cpu"), connection=conn)
            key = "bench:latency"
            q.enqueue("bench.queue_latency.mark_started", time.time(), key)  # warm-up: worker start-up is not latency
            conn.blpop([key], timeout=60)
            samples = []
            for _ in range(N):
                q.enqueue("bench.queue_latency.mark_started", time.time(), key, result_ttl=0)
                _, value = conn.blpop([key], timeout=30)
                samples.append(float(value) * 1000)
        finally:
            worker.terminate()
            worker.wait()
    p50, p95, p99 = (percentile(samples, q) for q in (50, 95, 99))
    print_table(f"enqueue -> job start through Redis + RQ ({N} jobs, ms)",
                ["p50", "p95", "p99", "goal p50", "verdict"],
                [[p50, p95, p99, "<= 50", "ok" if p50 <= 50 else "SLOW"]])
    return 0


def run_worker(url: str) -> None:
    """The production Worker class on the production queue name."""
    from server.grading.worker import GradingWorker  # and so the modules a service's worker has loaded

    conn = redis.Redis.from_url(url)
    GradingWorker([Queue(queue_name("cpu"), connection=conn)], connection=conn).work()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        run_worker(sys.argv[2])
        raise SystemExit(0)
    raise SystemExit(main())
