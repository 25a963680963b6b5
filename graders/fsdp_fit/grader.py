"""Grader of homework 3: train the starter GPT with FSDP full_shard on two ranks and
show, on the student's own script, "does not fit" becoming "fits".

Entry point ``grade(assignment, job, files, mode)`` (named in ``assignment.json``).
The script runs as ``torchrun --nproc_per_node=N train_fsdp.py --model-size S --steps K``
with ``starter/model.py`` beside it and the harness's FSDP observer on
(``DISTGRADE_FSDP=1``); then once more on a single rank (the unsharded side of the
line) unless in fast mode. The simulated card is the assignment's ``card`` scaled by
the model's parameter count against the reference size (15 GiB T4 for ``1b``): on a
GPU it is a per-process memory fraction, on a CPU the harness counts live tensor bytes.

Environment: ``DISTGRADE_FAST=1`` grades the ``fast`` size and steps without the
single-rank run (the samples test); ``DISTGRADE_LIMITS`` overrides sandbox limits.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from coursework import memory_calc
from coursework.assignments import Assignment
from coursework.progress import report_progress
from coursework.report import CheckStatus, GradeReport, text
from graders import checks_runner, gpu_slots, torchrun
from graders.fsdp_fit import checkpoint as ckpt_checks
from graders.fsdp_fit import checks as fsdp_checks
from graders.checks.ddp import Finding
from graders.evidence import weights
from graders.checks.timing import loss_series
from graders.checks.render import render as result_of  # one Finding -> CheckResult rendering for all graders

CHECKS = ("run.distributed", "fsdp.sharded", "fsdp.wrap_units", "memory.fit", "train.progress", "ckpt.save")
SCRIPT_NAME = "train_fsdp.py"


def fast_mode() -> bool:
    return os.environ.get("DISTGRADE_FAST") == "1"


def run_plan(mode: str, nproc: int, available_gpus: int, baseline: bool) -> dict[str, Any]:
    """Which runs this host can do: the N-rank run and the 1-rank baseline, or why not.

    GPU mode needs ``nproc`` cards for the graded run and one for the baseline; a host
    with fewer skips what it cannot run and says so, instead of failing the student.
    """
    if mode != "gpu":
        return {"main": True, "baseline": baseline, "reason": None}
    reason = gpu_slots.shortfall(nproc, available_gpus)
    return {"main": reason is None, "baseline": baseline and available_gpus >= 1, "reason": reason}


def capacity_bytes(card: dict[str, Any], size_params: int) -> float:
    """The simulated card for a model size: the real card scaled by parameters vs the reference size."""
    return card["capacity_gib"] * 2 ** 30 * size_params / card["reference_params"]


def card_label(card: dict[str, Any], size: str) -> dict[str, str]:
    """The simulated card's name in both languages ("T4 (15 GiB, scaled to small)"): it goes into
    messages of both languages, so a plain string would put English into the Chinese ones."""
    label = card["label"]
    if isinstance(label, str):
        return {"zh": label.format(size=size), "en": label.format(size=size)}
    return {lang: label[lang].format(size=size) for lang in ("zh", "en")}


def estimates(params: int, cards: int, precision: str, optimizer: str) -> dict[int, dict[str, Any]]:
    """Analytic per-card model states for no sharding and ZeRO-1/2/3 (``coursework.memory_calc``)."""
    return {stage: memory_calc.estimate(memory_calc.TrainingSetup(
        params=params, cards=cards, precision=memory_calc.Precision(precision),
        optimizer=memory_calc.Optimizer(optimizer), stage=stage)).to_dict() for stage in (0, 1, 2, 3)}


def grade(assignment: Assignment, job: Path, files: list[Path], mode: str = "cpu") -> GradeReport:
    """Grade one submitted script; see the module docstring."""
    cfg = assignment.raw
    started = time.monotonic()
    report = GradeReport(assignment=assignment.id, mode=mode)
    nproc = int(cfg["nproc"])
    which = "fast" if fast_mode() else mode
    size, steps = cfg["sizes"][which], int(cfg["steps"][which])
    size_params = int(cfg["size_params"][size])
    capacity = capacity_bytes(cfg["card"], size_params)
    plan = run_plan(mode, nproc, gpu_slots.job_gpus() if mode == "gpu" else 0,
                    baseline=bool(cfg["baseline"]["enabled"]) and not fast_mode())
    os.chmod(job, 0o711)
    script = _stage(files[0], job, assignment.path / "starter" / "model.py")
    limits = torchrun.make_limits(assignment.limits.get(mode, {}), json.loads(os.environ.get("DISTGRADE_LIMITS", "{}")))
    # The data set holds one epoch of the graded run (model.py reads DISTGRADE_DATA_LEN): within it a DistributedSampler
    # hands each sample to one rank only, so rows two ranks share show the data was not split (train.progress)
    epoch_rows = int(cfg["batch_size"][size]) * steps
    env = {"DISTGRADE_FSDP": "1", "DISTGRADE_CAPACITY_BYTES": str(int(capacity)),
           "DISTGRADE_DATA_LEN": str(epoch_rows * nproc)}

    def launch(n: int, k: int, tag: str):
        report_progress(f"run.{tag}", logs={})
        return torchrun.run(script, n, root=job / f"n{n}", data_dir=script.parent, epochs=0, limits=limits,
                            mode=mode, gpus=gpu_slots.assigned(n) if mode == "gpu" else None,
                            script_args=["--model-size", size, "--steps", str(k)], extra_env=env,
                            progress=f"run.{tag}")

    run = launch(nproc, steps, "distributed") if plan["main"] else None
    base = None
    if plan["baseline"] and (run is None or run.all_finished):
        base = launch(1, int(cfg["baseline"]["steps"]), "baseline")
    est = estimates(size_params, nproc, cfg["precision"], cfg["optimizer"])
    card = card_label(cfg["card"], size)
    findings = _findings(cfg, run, base, nproc, capacity, card, est, mode, plan["reason"], size, job, epoch_rows)
    for check_id in cfg["checks"]:  # every check of assignment.json: the report is out of its total
        finding = findings.get(check_id) or Finding(CheckStatus.ERROR, "error")
        report.add(checks_runner.render(result_of, cfg["checks"][check_id], check_id, finding))  # isolated
    report.plots = {"memory": memory_plot(cfg, run, base, capacity, size, size_params, nproc, est),
                    "loss": {f"rank{r}": loss_series(run, r) for r in sorted(run.ranks)} if run else {}}
    runs = [r for r in (run, base) if r]
    report.logs = {f"n{r.nproc}.{k}": v for r in runs for k, v in r.logs.items() if v}
    report.timings = {"total_s": round(time.monotonic() - started, 2), "steps": steps,
                      **{f"run_n{r.nproc}_s": round(r.result.wall_s, 2) for r in runs}}
    report.sandbox = {"layers": runs[0].result.layers if runs else []}
    failed = [c.id for c in report.checks if c.status in (CheckStatus.FAIL, CheckStatus.WARN)]
    report.summary = text(f"得分 {report.score:g}/{report.max_score:g}。" + (f"需要处理：{', '.join(failed)}。" if failed else "全部通过。"),
                          f"Score {report.score:g}/{report.max_score:g}. " + (f"To fix: {', '.join(failed)}." if failed else "Everything passed."))
    return report


def _stage(src: Path, job: Path, starter: Path) -> Path:
    """The submission as ``train_fsdp.py`` with the starter ``model.py`` beside it (read-only)."""
    code = job / "code"
    code.mkdir()
    script = code / SCRIPT_NAME
    shutil.copyfile(src, script)
    shutil.copyfile(starter, code / "model.py")
    os.chmod(code, 0o755)
    for p in code.iterdir():
        os.chmod(p, 0o644)
    return script


def _findings(cfg, run, base, nproc, capacity, card, est, mode, reason, size, job, epoch_rows) -> dict[str, Finding]:
    if run is None:
        skipped = Finding(CheckStatus.SKIP, "host", {"reason": reason or ""})
        return {cid: skipped for cid in CHECKS}
    ccfg = cfg["checks"]
    size_params = int(cfg["size_params"][size])
    fsdp = checks_runner.isolated(fsdp_checks)  # one check's exception is that check's error
    out = {"run.distributed": fsdp.check_run(run, card),
           "fsdp.sharded": fsdp.check_sharded(run, nproc, est),
           "fsdp.wrap_units": fsdp.check_wrap_units(run, float(ccfg["fsdp.wrap_units"]["max_unit_fraction"])),
           "memory.fit": fsdp.check_fit(run, capacity, card, base, requested={"size": size, "params": size_params})}
    if run.all_finished:
        global_bytes = est[0]["params_bytes"]
        out["train.progress"] = fsdp.check_progress(run, float(ccfg["train.progress"]["min_loss_drop"]), epoch_rows)
        ckpt = checks_runner.isolated(ckpt_checks)
        work = job / f"n{nproc}" / "work"
        out["ckpt.save"] = ckpt.trained_weights(ckpt.check_checkpoint(run, global_bytes, mode), run,
                                                lambda rel: weights.read(work / rel, job))
    else:
        out["train.progress"] = out["ckpt.save"] = Finding(CheckStatus.FAIL, "not_finished")  # the script's doing
    return out


def memory_plot(cfg, run, base, capacity, size, size_params, nproc, est) -> dict[str, Any]:
    """Data for the report's memory bar chart: measured per rank, the 1-rank run, the analytic stages."""
    def bars(r):
        return [{"rank": k, **{f: v[f] for f in ("params", "grads", "optimizer", "other", "peak", "step")}}
                for k, v in fsdp_checks.peaks(r).items()] if r else []
    labels = cfg["estimate_labels"]
    ref = cfg["card"]
    return {
        "unit": "bytes", "size": size, "model_params": size_params, "world": nproc,
        "capacity": capacity, "card": card_label(cfg["card"], size)["en"],  # the chart names the card itself
        "ranks": bars(run), "baseline": {"nproc": 1, "ranks": bars(base)} if base else None,
        "estimates": [{"stage": s, "label": labels[str(s)], "params": e["params_bytes"], "grads": e["grads_bytes"],
                       "optimizer": e["optimizer_bytes"], "total": e["total_bytes"], "formula": e["formula"],
                       "fits": e["total_bytes"] <= capacity} for s, e in est.items()],
        "mirror": {"size": ref["reference_size"], "params": ref["reference_params"],
                   "capacity": ref["capacity_gib"] * 2 ** 30, "scale": size_params / ref["reference_params"]},
    }
