"""Every ``assignments/*/samples/*`` folder through the real CLI, checked against its expected.json.

expected.json: ``status``; ``checks`` (id -> required status); optional ``min_score`` /
``max_score``; ``message_contains`` (id -> lowercase substrings of the English message);
``limits`` (sandbox limit overrides, passed as ``DISTGRADE_LIMITS``); ``traps`` (what the host sets up
for a hostile sample and checks afterwards, see ``host_traps``); ``notes``; ``out_of`` (the report's
``max_score``: always the assignment's total); ``summary_contains`` (lowercase substrings of the English summary); ``waits`` (true: the run sleeps until a
limit ends it, so it is graded in a lane of its own beside the CPU-bound samples); ``trusted`` (``"all"``: homework 2
graded as where every field's reading earned the teachers' trust; without it nothing has, as shipped). ``"status": "rejected"``
means the upload must be refused (exit 3, no attempt used); ``message_contains.rejected`` checks stderr.
``host_modules`` (modules the assignment allows, ``graders.host_modules``): on a host that cannot import
one of them the grading must end as the host's failure (exit 4, the module named on stderr, no report);
elsewhere the rest of expected.json applies.

Samples are graded in fast mode, ``DISTGRADE_SAMPLE_JOBS`` (default 2) at a time: a verdict must not
depend on what else runs on the host (each job has its own uid, and speed is judged on the time a
rank was not waiting for a CPU), and most of a hostile sample's time is a limit running out. The
gradings start when the first sample test runs; each test waits for its own. A sample with
``traps`` inspects the whole host, so it runs alone; those start first, the rest in test order.
"""
from __future__ import annotations

import contextlib
import functools
import glob
import http.server
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRUSTED_ENV = "DISTGRADE_TRUSTED_READINGS"  # graders.config_annotation.core.TRUSTED_ENV
PINNED_SEED_ENV = "DISTGRADE_SYNTHETIC_SEED"  # graders.ddp_speedup.job.PINNED_SEED_ENV
# Homework 1's synthetic data for every sample: a worker draws a secret seed per job, and a sample that learns
# near the model floor would then pass or fail it by chance; pinned, a verdict is the same on every run.
SAMPLE_SEED = "7301"
SAMPLES = sorted(p for p in ROOT.glob("assignments/*/samples/*") if (p / "expected.json").is_file())


def _submission(folder: Path) -> Path:
    files = sorted(p for p in folder.iterdir() if p.name != "expected.json" and p.is_file())
    return files[0] if len(files) == 1 else folder


CANARY = b"DISTGRADE-CANARY password hashes and grades"
LEFTOVERS = ["/tmp/distgrade-hostile-leftover*", "/dev/shm/distgrade-hostile-leftover*"]
VICTIM = """
import os, sys, time
open("canary.txt", "w").write("DISTGRADE-VICTIM-CANARY")
while not os.path.exists("stop"):
    time.sleep(0.1)
"""


def _sleepers() -> list[int]:
    """Processes that are the hostile sample's detached ``sleep 600``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == b"sleep\x00600\x00":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@contextlib.contextmanager
def host_traps(traps: list[str]) -> Iterator[None]:
    """Set up what a hostile sample goes for on the host, and check after grading that it got none of it.

    ``var_canary``: a database-like file in the repository's ``var/``; ``http_server``: an HTTP server on
    the host's loopback that must receive no request; ``victim_job``: a concurrent sandboxed job that
    must end normally (not killed); ``leftovers``: no ``distgrade-hostile-leftover*`` in /tmp or /dev/shm
    and no detached sleeper afterwards.
    """
    with contextlib.ExitStack() as stack:
        checks = []
        if "var_canary" in traps:
            var = ROOT / "var"
            made_var = not var.exists()
            var.mkdir(exist_ok=True)
            canary = var / "distgrade-canary.db"
            canary.write_bytes(CANARY)
            os.chmod(canary, 0o644)  # as readable as an SQLite file created with the default umask
            stack.callback(lambda: (canary.unlink(missing_ok=True), made_var and var.rmdir()))
        if "http_server" in traps:
            hits: list[str] = []

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                    hits.append(self.path)
                    self.send_response(200)
                    self.end_headers()

                def log_message(self, *args: object) -> None:
                    pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            stack.callback(server.server_close)
            stack.callback(server.shutdown)
            checks.append(lambda: hits == [] or pytest.fail(f"the sample reached the host's web server: {hits}"))
        if "victim_job" in traps:
            from graders import sandbox, workspace
            job = stack.enter_context(workspace.job_dir("victim"))
            (job / "run").mkdir()
            outcome: dict[str, object] = {}

            def victim() -> None:
                outcome["result"] = sandbox.run([sys.executable, "-c", VICTIM, "distgrade-victim"],
                                                workdir=job / "run", limits=sandbox.Limits(wall_s=300),
                                                env={"PATH": "/usr/bin:/bin"})
            thread = threading.Thread(target=victim, daemon=True)
            thread.start()

            def victim_survived() -> None:
                (job / "run" / "stop").touch()
                thread.join(timeout=60)
                r = outcome.get("result")
                assert r is not None and r.returncode == 0 and r.killed_reason is None, r
            checks.append(victim_survived)
        yield
        if "leftovers" in traps:
            left = [p for pattern in LEFTOVERS for p in glob.glob(pattern)]
            assert left == [] and _sleepers() == [], f"left on the host: {left}, sleepers {_sleepers()}"
        for check in checks:
            check()


class HostShare:
    """Shared by ordinary gradings, exclusive for a sample whose traps look at the whole host."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._exclusive = False
        self._queued_exclusive = 0  # an exclusive one waiting keeps new ordinary ones out

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        with self._cond:
            if exclusive:
                self._queued_exclusive += 1
                self._cond.wait_for(lambda: not self._exclusive and self._running == 0)
                self._queued_exclusive -= 1
            else:
                self._cond.wait_for(lambda: not self._exclusive and not self._queued_exclusive)
            self._running += 1
            self._exclusive = exclusive
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._exclusive = False
                self._cond.notify_all()


def _trapped(folder: Path) -> bool:
    """Whether the sample's host traps look at the whole host (so it must grade alone)."""
    return bool(json.loads((folder / "expected.json").read_text(encoding="utf-8")).get("traps"))


@functools.cache
def _import_error(module: str) -> str | None:
    from graders.host_modules import import_error
    return import_error(module)


def _waits(folder: Path) -> bool:
    """Whether the sample's run mostly sleeps until a limit ends it (``"waits": true`` in expected.json)."""
    return bool(json.loads((folder / "expected.json").read_text(encoding="utf-8")).get("waits"))


def grade(folder: Path, var_dir: Path, share: HostShare) -> subprocess.CompletedProcess:
    """The sample through the real CLI, inside its host traps."""
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    env = {**os.environ, "DISTGRADE_FAST": "1", "DISTGRADE_LIMITS": json.dumps(expected.get("limits", {})),
           "DISTGRADE_VAR_DIR": str(var_dir), PINNED_SEED_ENV: SAMPLE_SEED}
    env.pop("DISTGRADE_PROGRESS_FILE", None)
    env.pop(TRUSTED_ENV, None)  # homework 2 as shipped: no field's reading has earned trust yet ...
    if expected.get("trusted") == "all":  # ... unless the sample is about the reading itself
        from coursework.config_annotation import catalogue
        cat = catalogue.load()
        from coursework.trust import KINDS
        env[TRUSTED_ENV] = json.dumps([f"{d}:{p}:{k}" for d in cat.raw["fields"] for p in cat.fields(d) for k in KINDS])
    with share.hold(exclusive=_trapped(folder)), host_traps(expected.get("traps", [])):
        proc = subprocess.run([sys.executable, "-m", "graders", "grade", folder.parent.parent.name,
                               str(_submission(folder)), "--json"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
    keep = os.environ.get("DISTGRADE_SAMPLE_REPORTS")  # a folder: every report kept, to tune a check on the corpus
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{folder.parent.parent.name}__{folder.name}.json").write_text(proc.stdout, encoding="utf-8")
    return proc


@pytest.fixture(scope="module")
def gradings(request, tmp_path_factory, nbgrader_templates) -> Iterator[dict[Path, Future]]:
    """Every selected sample's grading, started at once on ``DISTGRADE_SAMPLE_JOBS`` threads.

    Each grading has a var folder of its own, but homework 2's generated nbgrader course is shared
    (``nbgrader_templates``): built by the first notebook graded, copied by the rest, as on a worker."""
    chosen = [item.callspec.params["folder"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_sample"]
    share = HostShare()
    # Trapped samples run alone. Started first, back to back, none of them waits with a core idle for an
    # ordinary grading to drain, as each one did when it came up in the middle of the list.
    chosen.sort(key=lambda folder: not _trapped(folder))  # stable: otherwise in test order
    # A sample that mostly waits for a limit with its processes asleep (a hang, a sleep) gets a lane of its
    # own beside the CPU-bound ones, once the trapped samples are done: it held a whole job slot idle.
    waiting = [f for f in chosen if _waits(f) and not _trapped(f)]
    busy = [f for f in chosen if f not in waiting]
    with ThreadPoolExecutor(max_workers=max(1, int(os.environ.get("DISTGRADE_SAMPLE_JOBS", "2")))) as pool, \
            ThreadPoolExecutor(max_workers=1) as lane:
        def var() -> Path:
            return nbgrader_templates(tmp_path_factory.mktemp("var"))
        futures = {folder: pool.submit(grade, folder, var(), share) for folder in busy}
        trapped = [futures[f] for f in busy if _trapped(f)]

        def after_trapped(folder: Path, var: Path) -> subprocess.CompletedProcess:
            for future in trapped:
                future.exception()  # waits; its own test reports what went wrong
            return grade(folder, var, share)
        futures.update({folder: lane.submit(after_trapped, folder, var()) for folder in waiting})
        yield futures
        for future in futures.values():
            future.cancel()


def test_host_share_runs_trapped_samples_alone() -> None:
    share, seen, lock = HostShare(), [], threading.Lock()
    running = {"n": 0}

    def job(exclusive: bool) -> None:
        with share.hold(exclusive):
            with lock:
                running["n"] += 1
                seen.append((exclusive, running["n"]))
            threading.Event().wait(0.05)
            with lock:
                running["n"] -= 1
    threads = [threading.Thread(target=job, args=(e,)) for e in (False, False, True, False, False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(n == 1 for exclusive, n in seen if exclusive), seen
    assert max(n for _, n in seen) >= 2  # ordinary ones overlap


@pytest.mark.slow
@pytest.mark.parametrize("folder", SAMPLES, ids=[f"{p.parent.parent.name}/{p.name}" for p in SAMPLES])
def test_sample(folder: Path, gradings: dict[Path, Future]) -> None:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    proc = gradings[folder].result()
    lacking = [m for m in expected.get("host_modules", []) if _import_error(m)]
    if lacking:  # the host's failure, not the student's: exit 4 (retried, no attempt used), no report
        assert proc.returncode == 4 and not proc.stdout.strip(), f"not a host failure: {proc.stdout[-2000:]}"
        assert f"cannot import {lacking[0]}" in proc.stderr, proc.stderr[-2000:]
        return
    if expected.get("status") == "rejected":  # refused before grading: exit 3, reason on stderr, no report
        assert proc.returncode == 3 and not proc.stdout.strip(), f"not rejected: {proc.stdout[-2000:]}"
        for part in expected.get("message_contains", {}).get("rejected", []):
            assert part in proc.stderr.lower(), f"{part!r} not in {proc.stderr!r}"
        return
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be exactly one JSON report:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    report = json.loads(lines[0])
    assert report["status"] == expected.get("status", "graded"), report.get("staff_traceback")
    checks = {c["id"]: c for c in report["checks"]}
    for check_id, status in expected.get("checks", {}).items():
        assert check_id in checks, f"no check {check_id}"
        got = checks[check_id]
        assert got["status"] == status, f"{check_id}: {got['status']} != {status}: {got['message']['en']}"
    for check_id, parts in expected.get("message_contains", {}).items():
        message = checks[check_id]["message"]["en"].lower()
        for part in parts:
            assert part in message, f"{check_id}: {part!r} not in {message!r}"
    if "min_score" in expected:
        assert report["score"] >= expected["min_score"]
    if "max_score" in expected:
        assert report["score"] <= expected["max_score"], report["score"]
    if "out_of" in expected:
        assert report["max_score"] == expected["out_of"], f"scored out of {report['max_score']}"
    for part in expected.get("summary_contains", []):
        assert part in report["summary"]["en"].lower(), f"{part!r} not in {report['summary']['en']!r}"
