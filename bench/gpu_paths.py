"""The paths ``bench.gpu_check`` runs, one function each: ``path(env) -> Row``.

Every path uses the grader's own code (sandbox, slots, torchrun runner, checks, worker) as
a grading does, on data it makes itself; nothing here is a stand-in for a part under test.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GiB = 2 ** 30
T4 = 15 * GiB  # homework 3's simulated card at the reference size


@dataclass
class Row:
    """One path's outcome: ``status`` is pass, fail or skip."""

    path: str
    status: str
    seconds: float = 0.0
    numbers: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Env:
    """What every path shares: the scratch folder (0711) and whether a GPU is there."""

    tmp: Path
    gpu: bool
    notes: list[str] = field(default_factory=list)


def _code_dir(env: Env, name: str, files: dict[str, str]) -> Path:
    """A job-like folder ``tmp/name/code`` holding ``files`` (readable by the sandbox's uid)."""
    job = env.tmp / name
    code = job / "code"
    code.mkdir(parents=True)
    os.chmod(job, 0o711)
    for fname, body in files.items():
        (code / fname).write_text(body)
        os.chmod(code / fname, 0o644)
    os.chmod(code, 0o755)
    return code


def _verdict(ok: bool, why_not: list[str]) -> tuple[str, str]:
    return ("pass", "") if ok else ("fail", "; ".join(why_not))


# --- host -------------------------------------------------------------------------------

def host(env: Env) -> Row:
    """What the driver and torch see: GPU count, name, memory, torch and NCCL versions."""
    import torch

    from graders import gpu_slots

    count = gpu_slots.detect_gpus()
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    nums = {"gpus": count, "name": props.name, "memory_gib": round(props.total_memory / GiB, 1),
            "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "driver": smi}
    status, note = _verdict(count >= 1 and torch.cuda.device_count() >= 1, ["nvidia-smi -L or torch sees no GPU"])
    return Row("host", status, numbers=nums, note=note)


# --- sandbox ----------------------------------------------------------------------------

def sandbox_probe(env: Env) -> Row:
    """The worker's start-up probe: every required layer present (fails closed otherwise)."""
    from graders import sandbox

    p = sandbox.probe()
    ok = not p["missing"] and not p["error"]
    note = "" if ok else f"missing: {p['missing']}; error: {p['error']}"
    return Row("sandbox", "pass" if ok else "fail", numbers={"enforcement": p["enforcement"], "layers": len(p["layers"])},
               note=note, details=p)


SANDBOX_PROBE = '''
import json, os, torch
nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
ok = False
if torch.cuda.is_available():
    a = torch.randn(2048, 2048, device="cuda")
    ok = bool(torch.isfinite(a @ a).all())
print(json.dumps({"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": torch.cuda.device_count(),
                  "nodes": nodes, "matmul": ok, "host_gpus": os.environ.get("DISTGRADE_HOST_GPUS"),
                  "uid": os.getuid()}))
'''


def sandbox_gpu(env: Env) -> Row:
    """CUDA inside the sandbox: only the job's device nodes, GPUs renumbered from 0, not root."""
    from graders import sandbox

    code = _code_dir(env, "sandbox_gpu", {"probe.py": SANDBOX_PROBE})
    r = sandbox.run([sys.executable, str(code / "probe.py")], workdir=code.parent / "run",
                    limits=sandbox.Limits(wall_s=120, address_space=False), env={"PATH": "/usr/bin:/bin"},
                    ro_binds=[(str(code), str(code))], gpus=[0])
    seen = _last_json(r.stdout)
    isolated = "bwrap" in r.layers
    others = [n for n in seen.get("nodes", []) if n.startswith("nvidia") and n[6:].isdigit() and n != "nvidia0"]
    why = [w for ok, w in [
        (r.returncode == 0, f"exit {r.returncode}: {r.stderr[-400:]}"),
        (seen.get("count") == 1, f"torch sees {seen.get('count')} GPUs"),
        (seen.get("matmul") is True, "the CUDA matmul failed"),
        (not isolated or seen.get("visible") == "0", f"CUDA_VISIBLE_DEVICES={seen.get('visible')!r} inside bwrap"),
        (not isolated or not others, f"other GPUs' nodes visible: {others}"),
        (seen.get("uid", 0) != 0, "ran as root")] if not ok]
    status, note = _verdict(not why, why)
    return Row("sandbox.gpu", status, numbers={"wall_s": round(r.wall_s, 1), "visible": seen.get("visible"),
                                               "nodes": ",".join(seen.get("nodes", [])), "bwrap": isolated},
               note=note, details={"seen": seen, "layers": r.layers, "stderr": r.stderr[-3000:]})


def _last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


# --- GPU slots --------------------------------------------------------------------------

def slots(env: Env) -> Row:
    """Take every GPU of the host, see a further request wait and give up, give them back."""
    from graders import gpu_slots

    host_gpus = gpu_slots.host_gpus()
    simulated = host_gpus.count == 0
    if simulated:  # no driver here: the same lock logic on a declared one-GPU host
        host_gpus = gpu_slots.HostGpus(1, fake=True)
    topology = None if simulated else gpu_slots.read_topology(host_gpus.count)
    pool = gpu_slots.SlotPool(env.tmp / "slots", host_gpus, topology)
    started = time.monotonic()
    lease = pool.acquire(host_gpus.count, label="gpu_check", timeout=10)
    took_ms = round(1000 * (time.monotonic() - started), 1)
    try:
        pool.acquire(1, label="second", timeout=0.5)
        refused = False
    except gpu_slots.Stopped:
        refused = True
    held = pool.holders()
    lease.release()
    free_after = pool.free()
    why = [w for ok, w in [
        (lease.gpus == list(range(host_gpus.count)), f"got {lease.gpus}"),
        (refused, "a second job got a GPU that was held"),
        (free_after == list(range(host_gpus.count)), f"free after release: {free_after}")] if not ok]
    status, note = _verdict(not why, why)
    return Row("slots", status, numbers={"gpus": host_gpus.count, "simulated": simulated, "acquire_ms": took_ms,
                                         "topology": "none" if not topology else len(topology)},
               note=note or ("simulated one-GPU host (no nvidia-smi here)" if simulated else ""),
               details={"holders": held})


# --- homework 1 -------------------------------------------------------------------------

def _grade_cli(assignment: str, script: Path, extra_env: dict[str, str], timeout: float) -> dict[str, Any]:
    """``python -m graders grade ... --mode gpu --json`` as the worker runs it; the report."""
    proc = subprocess.run([sys.executable, "-m", "graders", "grade", assignment, str(script), "--json", "--mode", "gpu"],
                          cwd=ROOT, env={**os.environ, **extra_env}, capture_output=True, text=True, timeout=timeout)
    report = _last_json(proc.stdout)
    if not report:
        raise RuntimeError(f"grader exit {proc.returncode}, no report; stderr: {proc.stderr[-3000:]}")
    return report


def hw1_single(env: Env) -> Row:
    """Homework 1's reference in GPU mode on one GPU: the grader's verdicts, then the same
    1-process run through the runner (sandbox + harness) against bare torchrun."""
    from coursework import assignments
    from graders import cifar, torchrun
    from graders.checks import timing

    cfg = assignments.load("ddp_speedup").raw
    solution = ROOT / "assignments/ddp_speedup/solution/train.py"
    report = _grade_cli("ddp_speedup", solution, {"DISTGRADE_GPUS": "0", "DISTGRADE_VAR_DIR": str(env.tmp / "var1")}, 420)
    checks = {c["id"]: c for c in report.get("checks", [])}
    data = env.tmp / "hw1data"
    cifar.write_synthetic(data, **cfg.get("synthetic", {}))
    os.chmod(data, 0o755)
    epochs = int(cfg["epochs"]["gpu"])
    code = _code_dir(env, "hw1", {"train.py": solution.read_text()})
    run = torchrun.run(code / "train.py", 1, root=code.parent / "n1", data_dir=data, epochs=epochs,
                       limits=torchrun.make_limits(cfg["limits"]["gpu"]), mode="gpu", gpus=[0])
    tp = timing.throughput(run) or {}
    bare_env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGRADE_")}
    started = time.monotonic()
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                           str(code / "train.py"), "--data-dir", str(data), "--epochs", str(epochs)],
                          cwd=code.parent, env={**bare_env, "CUDA_VISIBLE_DEVICES": "0"},
                          capture_output=True, text=True, timeout=300)
    bare_s = time.monotonic() - started
    single, multi = checks.get("run.single", {}), checks.get("run.distributed", {})
    why = [w for ok, w in [
        (report.get("status") == "graded", f"report status {report.get('status')}"),
        (single.get("status") == "pass", f"run.single {single.get('status')}: {single.get('message', {}).get('en')}"),
        (multi.get("status") == "skip", f"run.distributed {multi.get('status')} on a 1-GPU host"),
        (run.all_finished, f"runner: not every rank finished: {run.logs.get('rank0', '')[-600:]}"),
        (bool(tp), "no steady step times recorded"),
        (bare.returncode == 0, f"bare torchrun exit {bare.returncode}: {bare.stderr[-600:]}")] if not ok]
    status, note = _verdict(not why, why)
    graded_s = run.result.wall_s
    return Row("hw1.nccl1", status, numbers={
        "grade_total_s": report.get("timings", {}).get("total_s"), "run_s": round(graded_s, 1),
        "bare_s": round(bare_s, 1), "overhead": round(graded_s / bare_s, 2) if bare_s else None,
        "samples_per_s": round(tp.get("steady", 0), 0), "score": f"{report.get('score')}/{report.get('max_score')}"},
        note=note, details={"checks": {k: (v.get("status"), v.get("message", {}).get("en")) for k, v in checks.items()},
                            "rank0_log": run.logs.get("rank0", "")[-3000:], "launcher": run.logs.get("launcher", "")[-2000:]})


# --- homework 3 -------------------------------------------------------------------------

UNSHARDED = '''
import argparse, torch, torch.distributed as dist
from model import build_model, make_dataset, SIZES
p = argparse.ArgumentParser(); p.add_argument("--model-size"); p.add_argument("--steps", type=int)
a = p.parse_args()
dist.init_process_group("nccl")
torch.cuda.set_device(0)
if __import__("os").environ.get("LIFT_CARD"):  # a script that lifts the simulated card
    torch.cuda.set_per_process_memory_fraction(1.0, 0)
model = build_model(a.model_size).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = make_dataset(a.model_size)
for i in range(a.steps):
    x, y = (t[None].cuda() for t in data[i])
    model(x, y).backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
'''


def run_unsharded(size: str, tmp: Path, card_bytes: int = T4, lift: bool = False):
    """One rank of an unsharded script under the sandbox and harness, on GPU 0, as homework 3's grader runs it."""
    from coursework import assignments
    from graders import torchrun

    cfg = assignments.load("fsdp_fit").raw
    job = tmp / (size + ("-lifted" if lift else ""))
    code = job / "code"
    code.mkdir(parents=True)
    os.chmod(tmp, 0o711)
    os.chmod(job, 0o711)
    (code / "train_fsdp.py").write_text(UNSHARDED)
    shutil.copyfile(ROOT / "assignments/fsdp_fit/starter/model.py", code / "model.py")
    os.chmod(code, 0o755)
    limits = torchrun.make_limits(cfg["limits"]["gpu"])
    return torchrun.run(code / "train_fsdp.py", 1, root=job / "n1", data_dir=code, epochs=0, limits=limits,
                        mode="gpu", gpus=[0], script_args=["--model-size", size, "--steps", "2"],
                        extra_env={"DISTGRADE_FSDP": "1", "DISTGRADE_CAPACITY_BYTES": str(card_bytes),
                                   **({"LIFT_CARD": "1"} if lift else {})})


def hw3_memory(env: Env) -> Row:
    """The 1b model unsharded on the simulated T4 is a CUDA OOM graded 'does not fit'; small fits."""
    from coursework import assignments
    from graders.fsdp_fit import grader as fsdp_fit
    from graders.fsdp_fit import checks as fsdp

    cfg = assignments.load("fsdp_fit").raw
    big = run_unsharded("1b", env.tmp / "hw3")
    fit = fsdp.check_fit(big, T4, "T4")
    message = fsdp_fit.result_of(cfg["checks"]["memory.fit"], "memory.fit", fit).message["en"]
    crash = fsdp.check_run(big, "T4")
    small = run_unsharded("small", env.tmp / "hw3")
    small_fit = fsdp.check_fit(small, T4, "T4")
    lifted = run_unsharded("1b", env.tmp / "hw3", lift=True)  # the card read from outside still says no
    lifted_fit = fsdp.check_fit(lifted, T4, "T4")
    card = ((lifted.evidence or {}).get("cards") or {}).get("cards", {}).get(0, {})
    oom = crash.evidence.get("oom", {}) if crash.evidence else {}
    peak = (small_fit.evidence or {}).get("ranks", {}).get(0, {}).get("peak") if small_fit.evidence else None
    why = [w for ok, w in [
        (fit.key == "oom", f"1b: memory.fit is {fit.key!r}, not 'oom': {big.logs.get('rank0', '')[-800:]}"),
        ("does not fit" in message.lower(), f"message: {message}"),
        (crash.key == "oom", f"1b: run.distributed is {crash.key!r}"),
        (small.all_finished, f"small did not finish: {small.logs.get('rank0', '')[-800:]}"),
        (small_fit.key == "fits", f"small: memory.fit is {small_fit.key!r}"),
        (lifted_fit.status.value == "fail", f"lifted card: memory.fit is {lifted_fit.key!r}, card {card}")] if not ok]
    status, note = _verdict(not why, why)
    allocated = float(oom.get("allocated", 0) or 0)
    return Row("hw3.memory", status, numbers={
        "card_gib": 15, "oom_allocated_gib": round(allocated / GiB, 2), "small_peak_mib": round(peak / 2 ** 20, 1) if peak else None,
        "big_run_s": round(big.result.wall_s, 1), "small_run_s": round(small.result.wall_s, 1),
        "host_peak_gib": round((big.result.peak_memory_bytes or 0) / GiB, 2),
        "lifted_verdict": lifted_fit.key, "lifted_card_used_gib": round((card.get("used_bytes") or 0) / GiB, 2)},
        note=note, details={"message": message, "oom": oom, "big_log": big.logs.get("rank0", "")[-3000:],
                            "small_log": small.logs.get("rank0", "")[-2000:]})


# --- a real worker ----------------------------------------------------------------------

def worker(env: Env) -> Row:
    """Homework 3's reference through a real RQ worker on a 1-GPU host: CPU pre-flight, the
    host's GPU slot, then the grader in GPU mode (its gpu2 job needs one card here: ``gpu1``)."""
    from bench.common import redis_server

    tmp = env.tmp / "worker"
    folder = tmp / "assignments" / "fsdp_fit"
    shutil.copytree(ROOT / "assignments/fsdp_fit", folder)
    meta = json.loads((folder / "assignment.json").read_text())
    meta["resources"]["gpu"] = "gpu1"
    (folder / "assignment.json").write_text(json.dumps(meta))
    for d in (tmp, tmp / "assignments", folder, *[p for p in folder.rglob("*") if p.is_dir()]):
        os.chmod(d, 0o755)
    db = tmp / "svc.db"
    with redis_server() as url:
        e = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "REDIS_URL": url, "DISTGRADE_VAR_DIR": str(tmp / "var"),
             "SECRET_KEY": secrets.token_hex(32), "LEASE_S": "10", "RECONCILE_EVERY_S": "1",
             "DISTGRADE_ASSIGNMENTS_DIR": str(tmp / "assignments"), "GRADING_MODES": "fsdp_fit=gpu",
             "DISTGRADE_CALIBRATE": "0", "DISTGRADE_GPU_SLOT_DIR": str(tmp / "slots"),
             "DISTGRADE_DEMO_PASSWORDS": "published", "PYTHONUNBUFFERED": "1",
             **({"WORKER_GPUS": "1"} if env.gpu else {"DISTGRADE_FAKE_GPUS": "1"})}
        for args in (["db", "upgrade"], ["seed-demo"]):
            subprocess.run([sys.executable, "-m", "flask", "--app", "server", *args], cwd=ROOT, env=e,
                           check=True, capture_output=True, timeout=120)
        sid = int(subprocess.run([sys.executable, "-c", SUBMIT], cwd=ROOT, env=e, check=True, capture_output=True,
                                 text=True, timeout=120).stdout.strip().splitlines()[-1])
        log = open(tmp / "worker.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "server.grading.worker"], cwd=ROOT, env=e,
                                start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        try:
            phases, row, first = _watch(db, sid, timeout=360)
        finally:
            os.killpg(proc.pid, 9)
            proc.wait()
            log.close()
    report = json.loads(row[2]) if row and row[2] else {}
    got = report.get("resources", {})
    why = [w for ok, w in [
        (row is not None and row[0] == "graded", f"final status {row[0] if row else 'none (timed out)'}"),
        ("preflight" in phases, f"no pre-flight phase seen: {phases}"),
        ("starting" in phases[phases.index("preflight") + 1:] if "preflight" in phases else False,
         f"no GPU run after the pre-flight: {phases}"),
        (report.get("mode") == ("gpu" if env.gpu else "cpu"), f"report mode {report.get('mode')}"),
        (got.get("gpus") == [0], f"GPUs held: {got.get('gpus')}")] if not ok]
    status, note = _verdict(not why, why)
    at = {p: round(t, 1) for p, t in first.items()}
    return Row("worker", status, numbers={
        "phases": ">".join(phases), "preflight_s": _between(at, "preflight", "starting"),
        "gpu_run_s": report.get("timings", {}).get("total_s"), "waited_s": got.get("waited_s"),
        "score": f"{report.get('score')}/{report.get('max_score')}"},
        note=note, details={"first_seen": at, "error_detail": (row[3] or "")[-4000:] if row else None, "checks": {c["id"]: c["status"] for c in report.get("checks", [])},
                            "worker_log": (tmp / "worker.log").read_text(errors="replace")[-4000:]})


SUBMIT = '''
from pathlib import Path
from server import create_app
from server.extensions import db
from server.grading.queue import try_enqueue
from server.models import Course, Submission, User
app = create_app()
with app.app_context():
    data = Path("assignments/fsdp_fit/solution/train_fsdp.py").read_bytes()
    user = db.session.scalar(db.select(User).where(User.username == "alice"))
    course = db.session.scalar(db.select(Course))
    sub = Submission(user_id=user.id, course_id=course.id, assignment_id="fsdp_fit", filename="train_fsdp.py",
                     content=data, sha256=Submission.digest(data), size=len(data), resource="gpu1", mode="gpu")
    db.session.add(sub)
    db.session.commit()
    try_enqueue(sub)
    print(sub.id)
'''


def _watch(db: Path, sid: int, timeout: float) -> tuple[list[str], tuple | None, dict[str, float]]:
    """Poll the submission's row: the phases it showed in order, its final row, when each phase was first seen."""
    phases: list[str] = []
    first: dict[str, float] = {}
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute("SELECT status, progress_json, report_json, error_detail FROM submission WHERE id = ?", (sid,)).fetchone()
        conn.close()
        phase = (json.loads(row[1]) or {}).get("phase") if row and row[1] else None
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
            first.setdefault(phase, time.monotonic() - started)
        if row and row[0] in ("graded", "error"):
            return phases, row, first
        time.sleep(0.25)
    return phases, None, first


def _between(at: dict[str, float], a: str, b: str) -> float | None:
    return round(at[b] - at[a], 1) if a in at and b in at else None


# --- flight recorder --------------------------------------------------------------------

HANG = '''
import datetime, torch, torch.distributed as dist
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=10))
torch.cuda.set_device(0)
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
torch.cuda._sleep(400 * 1000 * 1000 * 1000)  # minutes of GPU cycles: the next collective queues behind them
dist.all_reduce(x)
torch.cuda.synchronize()
print("the hung collective returned", flush=True)
'''


def flight_recorder(env: Env) -> Row:
    """A collective that cannot finish: the NCCL watchdog's timeout ends the rank well before the
    wall clock, and the flight recorder dumps its trace into the channel folder."""
    from graders import torchrun
    from graders.sandbox import untrusted

    code = _code_dir(env, "hang", {"hang.py": HANG})
    run = torchrun.run(code / "hang.py", 1, root=code.parent / "n1", data_dir=code, epochs=0, script_args=[],
                       limits=torchrun.make_limits({"wall_s": 150, "address_space": False}), mode="gpu", gpus=[0])
    chan = code.parent / "n1" / "chan"
    with untrusted.open_dir(chan) as fd:
        names = untrusted.list_names(fd, 256) if fd is not None else []
    dumps = {n: (chan / n).stat().st_size for n in names if n.startswith("nccl_trace_rank_")}
    text = run.scan_logs.get("rank0", "") + run.logs.get("launcher", "")
    watchdog = any(s in text for s in ("Watchdog caught collective operation timeout", "timed out", "Timeout"))
    why = [w for ok, w in [
        (not run.result.timed_out, f"killed by the wall clock after {run.result.wall_s:.0f}s, not by the watchdog"),
        (run.result.wall_s < 10 + torchrun.NCCL_HEARTBEAT_S + 45,
         f"the rank lived {run.result.wall_s:.0f}s: the 10 s collective timeout did not end it promptly"),
        (watchdog, "no watchdog timeout in the rank's log"),
        (bool(dumps) and all(dumps.values()), f"no flight-recorder dump in the channel folder: {names}"),
        ("hung collective returned" not in text, "the collective returned")] if not ok]
    status, note = _verdict(not why, why)
    return Row("flight_recorder", status, numbers={"ended_s": round(run.result.wall_s, 1), "dump_bytes": sum(dumps.values()),
                                                   "exit": run.result.returncode},
               note=note, details={"rank0_log": run.scan_logs.get("rank0", "")[-4000:],
                                   "launcher": run.logs.get("launcher", "")[-2000:], "channel": names})
