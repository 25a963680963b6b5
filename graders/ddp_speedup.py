"""Grader of homework 1: run the script with torchrun on 1 and N processes and check it.

Entry point ``grade(assignment, job, files, mode)`` (named in ``assignment.json``).
Environment: ``DISTGRADE_FAST=1`` trains ``fast_epochs`` and does not judge speed
(the samples test); ``DISTGRADE_LIMITS`` is a JSON object overriding sandbox limits
(per-sample ``limits`` in ``expected.json``); ``DISTGRADE_VAR_DIR`` holds calibrations.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from graders import checks_runner, cifar, torchrun
from graders.assignments import REPO_ROOT, Assignment
from graders.checks import ddp
from graders.checks import ddp as checks_ddp
from graders.progress import report_progress
from graders.report import CheckResult, CheckStatus, GradeReport, text

VAR_DIR = Path(os.environ.get("DISTGRADE_VAR_DIR", REPO_ROOT / "var"))
RUN_CHECKS = ("run.distributed", "sampler.disjoint", "sampler.coverage", "sampler.reshuffle", "ddp.grad_sync",
              "io.rank0_only", "ddp.syncbn", "ddp.no_sync", "speedup", "batch.global")


def fast_mode() -> bool:
    return os.environ.get("DISTGRADE_FAST") == "1"


def gpu_plan(mode: str, nproc: int, available: int) -> tuple[bool, bool, str | None]:
    """(run single, run distributed, skip reason) for a host with ``available`` GPUs."""
    if mode != "gpu":
        return True, True, None
    if available < 1:
        return False, False, f"this host has no GPU; {nproc} are needed"
    if available < nproc:
        return True, False, f"this host has {available} GPU(s); {nproc} are needed"
    return True, True, None


def _gpu_count() -> int:
    import torch  # only in GPU mode: the CPU grader never pays for importing torch
    return torch.cuda.device_count()


def grade(assignment: Assignment, job: Path, files: list[Path], mode: str = "cpu") -> GradeReport:
    """Grade one submitted script; see the module docstring."""
    cfg = {**assignment.raw, "_path": str(assignment.path)}
    started = time.monotonic()
    report = GradeReport(assignment=assignment.id, mode=mode)
    nproc = int(cfg["nproc"])
    epochs = int(cfg["fast_epochs"] if fast_mode() else cfg["epochs"][mode])
    os.chmod(job, 0o711)
    script = _stage(files[0], job)
    data_dir, synthetic = _data_dir(job, mode, cfg)
    limits = torchrun.make_limits(assignment.limits.get(mode, {}), json.loads(os.environ.get("DISTGRADE_LIMITS", "{}")))
    gpus = _gpu_count() if mode == "gpu" else 0
    do_single, do_multi, skip_reason = gpu_plan(mode, nproc, gpus)

    def launch(n: int, tag: str):
        report_progress(f"run.{tag}", logs={})
        return torchrun.run(script, n, root=job / f"n{n}", data_dir=data_dir, epochs=epochs, limits=limits,
                            mode=mode, synthetic=synthetic, gpus=list(range(n)) if mode == "gpu" else None,
                            progress=f"run.{tag}")

    run1 = launch(1, "single") if do_single else None
    run_n = launch(nproc, "distributed") if do_multi else None
    report_progress("checks", logs={f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items()})
    findings = _findings(cfg, run1, run_n, epochs, skip_reason, mode)
    for check_id, finding in findings.items():
        report.add(checks_runner.render(_result, cfg["checks"][check_id], check_id, finding))  # isolated
    report.plots = _plots(run1, run_n, findings.get("speedup"))
    report.logs = {f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items() if v}
    report.timings = {"total_s": round(time.monotonic() - started, 2), "epochs": epochs,
                      **{f"run_n{r.nproc}_s": round(r.result.wall_s, 2) for r in (run1, run_n) if r}}
    report.sandbox = {"layers": (run_n or run1).result.layers if (run_n or run1) else []}
    failed = [c.id for c in report.checks if c.status in (CheckStatus.FAIL, CheckStatus.WARN)]
    report.summary = text(f"得分 {report.score:g}/{report.max_score:g}。" + (f"需要处理：{', '.join(failed)}。" if failed else "全部通过。"),
                          f"Score {report.score:g}/{report.max_score:g}. " + (f"To fix: {', '.join(failed)}." if failed else "Everything passed."))
    return report


def _stage(src: Path, job: Path) -> Path:
    code = job / "code"
    code.mkdir()
    script = code / "train.py"
    shutil.copyfile(src, script)
    os.chmod(code, 0o755)
    os.chmod(script, 0o644)
    return script


def _data_dir(job: Path, mode: str, cfg: dict) -> tuple[Path, bool]:
    real = os.environ.get("DISTGRADE_CIFAR_DIR")
    if mode == "gpu" and real and (Path(real) / cifar.FOLDER).is_dir():
        return Path(real), False
    root = job / "data"
    cifar.write_synthetic(root, **cfg.get("synthetic", {}))
    return root, True


def _findings(cfg, run1, run_n, epochs, skip_reason, mode) -> dict[str, checks_ddp.Finding]:
    ddp = checks_runner.isolated(checks_ddp)  # one check's exception is that check's error
    out: dict[str, checks_ddp.Finding] = {}
    skipped = ddp.Finding(CheckStatus.SKIP, "host", {"reason": skip_reason or ""})
    out["run.single"] = ddp.check_run(run1) if run1 else skipped
    if run_n is None:
        out.update({cid: skipped for cid in RUN_CHECKS})
        return out
    out["run.distributed"] = ddp.check_run(run_n)
    out["sampler.disjoint"] = ddp.check_disjoint(run_n)
    out["sampler.coverage"] = ddp.check_coverage(run_n)
    out["sampler.reshuffle"] = ddp.check_reshuffle(run_n)
    out["ddp.grad_sync"] = ddp.check_grad_sync(run_n)
    out["io.rank0_only"] = ddp.check_rank0_io(run_n, epochs, int(cfg["checks"]["io.rank0_only"]["extra_prints"]))
    out["ddp.syncbn"] = ddp.check_syncbn(run_n)
    out["ddp.no_sync"] = ddp.check_no_sync(run_n)
    out["speedup"] = _speedup(cfg, run1, run_n, mode)
    out["batch.global"] = ddp.batch_info(run1, run_n) if ddp.trained(run_n) else ddp.NO_TRAINING
    return out


def _speedup(cfg, run1, run_n, mode) -> ddp.Finding:
    if not (ddp.trained(run1) and ddp.trained(run_n)):
        return ddp.NO_TRAINING
    if not (run1.all_finished and run_n.all_finished):
        return ddp.Finding(CheckStatus.SKIP, "not_finished")
    t1, tn = ddp.throughput(run1), ddp.throughput(run_n)
    if not t1 or not tn:
        return ddp.Finding(CheckStatus.SKIP, "too_short")
    raw = tn["steady"] / t1["steady"]
    ev = {"throughput_1": round(t1["steady"], 2), "throughput_n": round(tn["steady"], 2), "raw": round(raw, 3),
          "loop_1": round(t1["loop"], 2), "loop_n": round(tn["loop"], 2), "unique_fraction": tn["unique_fraction"],
          "expected_gpu": cfg["checks"]["speedup"]["chapter_expectation"]}
    params = {"raw": f"{raw:.2f}", "t1": f"{t1['steady']:.0f}", "tn": f"{tn['steady']:.0f}", "n": run_n.nproc,
              "expect": ev["expected_gpu"]}
    if fast_mode():
        return ddp.Finding(CheckStatus.SKIP, "fast", params, ev)
    ref = calibration(cfg, mode)
    ev["reference"] = ref
    normalised = raw / ref["speedup"]
    ev["normalised"] = round(normalised, 3)
    status, fraction, band = ddp.speedup_band(normalised, cfg["checks"]["speedup"]["bands"])
    ev["band"] = band
    params.update(ref=f"{ref['speedup']:.2f}", norm=f"{normalised:.2f}")
    return ddp.Finding(status, band, params, ev, fraction)


def _host_key(cfg: dict, mode: str) -> dict[str, Any]:
    import importlib.metadata
    solution = (Path(cfg["_path"]) / "solution" / "train.py").read_bytes()
    return {"host": platform.node(), "cpus": os.cpu_count(), "mode": mode, "epochs": cfg["epochs"][mode],
            "torch": importlib.metadata.version("torch"), "solution": hashlib.sha256(solution).hexdigest()[:16],
            "synthetic": cfg.get("synthetic", {}), "calibration": cfg.get("calibration", {})}


def calibration(cfg: dict, mode: str, *, refresh: bool = False) -> dict[str, Any]:
    """The reference solution's speedup on this host: cached, refreshed when stale.

    Median of the tightest ``pairs`` interleaved 1-process/N-process runs, measuring up to
    ``max_pairs`` until they agree within ``max_spread``; a file lock keeps two graders on one
    host from calibrating at once.
    """
    ccfg = cfg["calibration"]
    key = _host_key(cfg, mode)
    path = VAR_DIR / "calibration" / f"ddp_speedup-{mode}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cached = json.loads(path.read_text())
            fresh = time.time() - cached["at"] < ccfg["max_age_days"] * 86400
            if cached["key"] == key and fresh and not refresh:
                return cached
        except (OSError, ValueError, KeyError):
            pass
        result = _calibrate(cfg, mode, ccfg, key)
        path.write_text(json.dumps(result, indent=1))
        return result


def settled_speedup(speedups: list[float], pairs: int, max_spread: float) -> float | None:
    """The median of the tightest ``pairs`` measurements if their max/min is within ``max_spread``.

    One pair measured while the host was busy (0.41 beside 0.94 and 0.79) must not move the
    reference every submission is judged against; None means "measure another pair".
    """
    if len(speedups) < pairs:
        return None
    ordered = sorted(speedups)
    windows = [ordered[i:i + pairs] for i in range(len(ordered) - pairs + 1)]
    best = min(windows, key=lambda w: w[-1] / w[0])
    return statistics.median(best) if best[-1] / best[0] <= max_spread else None


def _calibrate(cfg: dict, mode: str, ccfg: dict, key: dict) -> dict[str, Any]:
    import tempfile
    solution = Path(cfg["_path"]) / "solution" / "train.py"
    limits = torchrun.make_limits(cfg["limits"].get(mode, {}))
    speedups = []
    with tempfile.TemporaryDirectory(prefix="distgrade-calib-") as tmp:
        job = Path(tmp)
        os.chmod(job, 0o711)
        script = _stage(solution, job)
        data_dir, synthetic = _data_dir(job, mode, cfg)
        n = int(cfg["nproc"])
        pairs, max_pairs = int(ccfg["pairs"]), int(ccfg.get("max_pairs", ccfg["pairs"]))
        settled = None
        for i in range(max_pairs):
            runs = {}
            for k in (1, n):
                runs[k] = torchrun.run(script, k, root=job / f"p{i}-n{k}", data_dir=data_dir,
                                       epochs=int(cfg["epochs"][mode]), limits=limits, mode=mode,
                                       synthetic=synthetic, gpus=list(range(k)) if mode == "gpu" else None)
            t1, tn = ddp.throughput(runs[1]), ddp.throughput(runs[n])
            if t1 and tn:
                speedups.append(tn["steady"] / t1["steady"])
            settled = settled_speedup(speedups, pairs, float(ccfg.get("max_spread", float("inf"))))
            if settled is not None:
                break
    if not speedups:
        raise RuntimeError("calibration failed: the reference solution produced no throughput")
    return {"speedup": settled if settled is not None else statistics.median(speedups),
            "settled": settled is not None, "pairs": [round(s, 3) for s in speedups],
            "at": time.time(), "key": key}


def _result(ccfg: dict, check_id: str, f: ddp.Finding) -> CheckResult:
    msgs = ccfg["messages"]
    raw = (msgs.get(f.key) or (msgs.get(f.fallback) if f.fallback else None) or msgs.get(f.status.value)
           or {"zh": f.key, "en": f.key})
    fill = {k: v for k, v in f.params.items()}
    message = text(raw["zh"].format(**fill), raw["en"].format(**fill))
    hints = ccfg.get("hints", {})
    hint_raw = hints.get(f.key) or (hints.get(f.fallback) if f.fallback and f.key not in msgs else None)
    hint = text(hint_raw["zh"].format(**fill), hint_raw["en"].format(**fill)) if hint_raw else text("", "")
    points = float(ccfg.get("points", 0))
    if f.status == CheckStatus.SKIP or f.status == CheckStatus.INFO:
        earned, max_points = 0.0, 0.0 if f.status == CheckStatus.SKIP else points
    elif f.status == CheckStatus.PASS:
        earned, max_points = points, points
    elif f.fraction is not None:
        earned, max_points = round(points * f.fraction, 2), points
    elif f.status == CheckStatus.WARN:
        earned, max_points = points * float(ccfg.get("warn_fraction", 0.5)), points
    else:
        earned, max_points = 0.0, points
    return CheckResult(id=check_id, title=ccfg["title"], status=f.status, points=earned, max_points=max_points,
                       message=message, hint=hint, evidence={"key": f.key, **f.evidence})


def _plots(run1, run_n, speed: ddp.Finding | None) -> dict[str, Any]:
    ev = speed.evidence if speed else {}
    loss = {"n1.rank0": ddp.loss_series(run1)}
    if run_n:
        loss.update({f"n{run_n.nproc}.rank{r}": ddp.loss_series(run_n, r) for r in range(run_n.nproc)})
    return {"throughput": {"nproc": [1, run_n.nproc if run_n else 0],
                           "samples_per_s": [ev.get("throughput_1"), ev.get("throughput_n")]},
            "loss": loss}
