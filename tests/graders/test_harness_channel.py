"""The record channel as a second line, in a real rank interpreter (one rank, no torchrun).

A script that has read the harness reaches the observer through ``__closure__`` cells of a
patched torch function (no audited call). From there it tries every way to put a record on
the rank's authenticated stream, or to feed the harness a clock of its own; each must fail,
and the ways that are tampering must be reported. It also checks that the harness leaves a
DDP module exactly as pickle-able as it is without the grader.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graders import integrity
from graders.torchrun import HARNESS_DIR, ChannelServer, validate

FIND_OBSERVER = """
import os, time, types, torch
def _reach(fn, seen):  # through closure cells, and the functions held in them, to the object with a stream
    for c in getattr(fn, "__clo" + "sure__", None) or ():
        v = getattr(c, "cell_" + "contents")
        if hasattr(v, "stream"):
            return v
        if callable(v) and id(v) not in seen:
            seen.add(id(v))
            found = _reach(v, seen)
            if found is not None:
                return found
obs = _reach(torch.autograd.backward, set())
assert obs is not None, "observer not reached"
FAKE = {"type": "save", "path": "forged-%s.pt", "step": 0}
"""

FORGERIES = {
    # the stream's private path, which had no caller check
    "private_send": 'obs.stream._send(dict(FAKE, path="forged-private.pt"))\n',
    # the observer's own methods: they send from harness code, so only the entry check stops them
    "observer_method": textwrap.dedent("""
        ep = types.SimpleNamespace(key=7, number=0, batches=[[1, 2]], yielded=1, closed=False, kind="map",
                                   index_map=None, meta={"dataset": "forged-epoch"})
        getattr(obs, "_close_" + "epoch")(ep, True)
        """),
    # every check of the module swapped through a method's __globals__ (not audited on 3.11): the gate refuses
    "swapped_globals": textwrap.dedent("""
        g = type(obs.stream).send.__globals__
        for name in ("_from_harness", "_from_here", "_entered_properly"):
            g[name] = lambda *a, **k: True
        obs.stream._send(dict(FAKE, path="forged-globals.pt"))
        getattr(obs, "_close_" + "epoch")(types.SimpleNamespace(key=8, number=0, batches=[[3]], yielded=1,
            closed=False, kind="map", index_map=None, meta={"dataset": "forged-epoch-2"}), True)
        """),
    # the gate itself, asked directly
    "gate_direct": 'obs.stream._gate.send((dict(FAKE, path="forged-gate.pt"), True))\n',
    # an alarm whose event carries another record type
    "alarm_type": 'obs.stream.alarm({"event": "x", "type": "save", "path": "forged-alarm.pt", "step": 0})\n',
    # the generator frame that holds the socket and the MAC
    "gate_frame": 'obs.stream._gate.gi_frame\n',
    # the gate's own check, its body swapped for one that lets everything through
    "swapped_code": textwrap.dedent("""
        g = type(obs.stream).send.__globals__
        g["_chain_ok"].__code__ = (lambda *a: True).__code__
        obs.stream._gate.send((dict(FAKE, path="forged-code.pt"), True))
        """),
}
EXPECTED_EVENTS = {"private_send": "stream._send", "observer_method": "stream.entry",
                   "swapped_globals": "stream.gate", "gate_frame": "generator.frame",
                   "swapped_code": "patch.harness_code"}


def run_rank(tmp_path: Path, code: str) -> tuple[ChannelServer, subprocess.CompletedProcess, list[dict]]:
    """``code`` as rank 0 of a 1-process job under the harness; (server, process, integrity events)."""
    server = ChannelServer(tmp_path / "chan", 1)
    script = tmp_path / "train.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(HARNESS_DIR), "DISTGRADE_CHANNEL": str(server.dir), "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("DISTGRADE_HARNESS_OWNER", None)
    import time
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
    finally:
        server.close()
    events = validate(server, 1, (start, time.monotonic()))
    return server, proc, events


@pytest.fixture(scope="module")
def forged(tmp_path_factory):
    """One rank that tries every forgery in turn, then trains one honest step."""
    code = FIND_OBSERVER + "".join(f"\n# -- {name}\n{body}" for name, body in FORGERIES.items()) + textwrap.dedent("""
        p = torch.nn.Parameter(torch.ones(2))
        opt = torch.optim.SGD([p], lr=0.1)
        (p * p).sum().backward()
        opt.step()
        torch.save({"p": p.detach()}, "honest.pt")
        """)
    return run_rank(tmp_path_factory.mktemp("forge"), code)


def test_no_forged_record_reaches_the_grader(forged) -> None:
    server, proc, _ = forged
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = server.streams[0].records
    saves = [r["path"] for r in records if r.get("type") == "save"]
    # Swapping the gate's check function body is an audited assignment: detected (patch.harness_code), not prevented.
    assert [p for p in saves if p != "forged-code.pt"] == ["honest.pt"], saves
    assert not any(r.get("type") == "epoch" for r in records)
    assert server.streams[0].first("finished") is not None  # the honest part still reports


@pytest.mark.parametrize("route", sorted(EXPECTED_EVENTS))
def test_each_forgery_is_reported(forged, route: str) -> None:
    _, _, events = forged
    kinds = {e["kind"] for e in events}
    assert EXPECTED_EVENTS[route] in kinds, kinds


def test_the_seal_still_matches(forged) -> None:
    server, _, events = forged
    assert server.streams[0].seal_ok is True
    assert not {"seal_mac", "seal_count", "schema"} & {e["kind"] for e in events}


SLOW_CLOCK = """
import time, torch
real = time.monotonic
t0 = real()
time.monotonic = lambda: t0 + (real() - t0) / 4  # a clock at a quarter speed: steps look 4x faster
p = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([p], lr=0.1)
for _ in range(6):
    (p * p).sum().backward()
    opt.step()
    time.sleep(0.1)
"""


def test_a_replaced_clock_does_not_feed_step_times(tmp_path: Path) -> None:
    server, proc, events = run_rank(tmp_path, SLOW_CLOCK)
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = [x for r in server.streams[0].of("steps") for x in r["t"]]
    assert len(t) == 6 and t[-1] - t[0] >= 0.45, t  # five sleeps of 0.1 s on the real clock
    assert integrity.validate_stream is not None and events == []


SAVE_WHOLE_DDP = """
import io, os, pickle, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", init_method="file://" + os.path.abspath("store"), rank=0, world_size=1)
ddp = DDP(torch.nn.Linear(4, 2))
assert ddp._comm_hooks == [], ddp._comm_hooks  # as without the grader
buf = io.BytesIO()
torch.save(ddp, buf)  # Azure ML's example saves the whole DDP module
buf.seek(0)
again = torch.load(buf, weights_only=False)
assert isinstance(again, DDP) and not any("dg" in k for k in vars(again))

def student_hook(state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut
other = DDP(torch.nn.Linear(4, 2))
other.register_comm_hook(None, student_hook)
assert [h for h, _ in other._comm_hooks] == [student_hook]  # what DDP records for the script's own hook
other(torch.ones(3, 4)).sum().backward()
print("SAVED-OK")
dist.destroy_process_group()
"""


def test_a_whole_ddp_module_pickles_as_without_the_grader(tmp_path: Path) -> None:
    server, proc, events = run_rank(tmp_path, SAVE_WHOLE_DDP)
    assert proc.returncode == 0 and "SAVED-OK" in proc.stdout, proc.stderr[-3000:]
    assert events == []


SAVE_FAILS = """
import logging, traceback, torch
logging.basicConfig()
try:  # a failed save passes through the grader's patched torch.save
    torch.save({"x": 1}, "/nonexistent-scratch/ckpt.pt")
except (OSError, RuntimeError) as exc:
    caught = exc
    traceback.print_exc()
    traceback.format_exc()
    logging.getLogger("train").exception("no scratch")
"""


def test_printing_a_traceback_through_a_patched_function_is_honest(tmp_path: Path) -> None:
    _, proc, events = run_rank(tmp_path, SAVE_FAILS)
    assert proc.returncode == 0 and "nonexistent-scratch" in proc.stderr, proc.stderr[-3000:]
    assert events == []


@pytest.mark.parametrize("walk", ["[f for f, _ in traceback.walk_tb(caught.__traceback__)]",
                                  "__import__('inspect').getinnerframes(caught.__traceback__)"])
def test_walking_that_traceback_for_its_frames_is_reported(tmp_path: Path, walk: str) -> None:
    _, proc, events = run_rank(tmp_path, SAVE_FAILS + walk + "\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "traceback.tb_frame" in {e["kind"] for e in events}
