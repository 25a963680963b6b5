"""Grader of homework 1: run the script with torchrun on 1 and N processes and check it.

Entry point ``grade(assignment, job, files, mode)`` (named in ``assignment.json``).
Environment: ``DISTGRADE_FAST=1`` trains ``fast_epochs`` and does not judge speed
against the reference (the samples test; a held-back 1-process run still fails);
``DISTGRADE_LIMITS`` is a JSON object overriding sandbox limits (per-sample ``limits`` in
``expected.json``); ``DISTGRADE_VAR_DIR`` holds calibrations (``graders.calibration``).

Every id of ``assignment.json``'s ``checks`` gets a result (``graders.checks.registry``), so the
report is always out of the assignment's total. Speed is compared like with like against the
reference solution measured on this host under an exclusive host lock; this grading holds the
lock shared while its own runs are timed.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from coursework.assignments import Assignment
from coursework.progress import report_progress
from coursework.report import CheckStatus, GradeReport, text
from graders import calibration, checks_runner, cifar, gpu_slots, torchrun
from graders.checks import ddp
from graders.checks.registry import Context
from graders.evidence import model as evidence_model
from graders.checks.render import not_graded_here, render


def fast_mode() -> bool:
    return os.environ.get("DISTGRADE_FAST") == "1"


def gpu_plan(mode: str, nproc: int, available: int) -> tuple[bool, bool, dict[str, str] | None]:
    """(run single, run distributed, skip reason in zh and en) for a host with ``available`` GPUs."""
    if mode != "gpu":
        return True, True, None
    reason = gpu_slots.shortfall(nproc, available)
    return available >= 1, reason is None, reason


def _gpu_count() -> int:
    given = gpu_slots.available()  # inside a worker: the GPUs this job was allocated
    if given is not None:
        return given
    import torch  # only in GPU mode: the CPU grader never pays for importing torch
    return torch.cuda.device_count()


def grade(assignment: Assignment, job: Path, files: list[Path], mode: str = "cpu") -> GradeReport:
    """Grade one submitted script; see the module docstring."""
    cfg = {**assignment.raw, "_path": str(assignment.path), "_id": assignment.id}
    started = time.monotonic()
    report = GradeReport(assignment=assignment.id, mode=mode)
    nproc = int(cfg["nproc"])
    epochs = int(cfg["fast_epochs"] if fast_mode() else cfg["epochs"][mode])
    os.chmod(job, 0o711)
    script = _stage(files[0], job)
    data_dir, synthetic = _data_dir(job, mode, cfg)
    limits = torchrun.make_limits(wall_limits(assignment.limits.get(mode, {}), script),
                                  json.loads(os.environ.get("DISTGRADE_LIMITS", "{}")))
    gpus = _gpu_count() if mode == "gpu" else 0
    do_single, do_multi, skip_reason = gpu_plan(mode, nproc, gpus)

    def launch(n: int, tag: str):
        report_progress(f"run.{tag}", logs={})
        return torchrun.run(script, n, root=job / f"n{n}", data_dir=data_dir, epochs=epochs, limits=limits,
                            mode=mode, synthetic=synthetic, gpus=gpu_slots.assigned(n) if mode == "gpu" else None,
                            progress=f"run.{tag}")

    ref = None
    if do_single and do_multi and not fast_mode():  # measured apart from this job, normally at worker start-up
        ref = calibration.reference(cfg, mode, on_wait=_calibrating)
    with calibration.host_shared(on_wait=lambda: _calibrating(calibration.eta_minutes(assignment.id, mode, cfg))):
        run1 = launch(1, "single") if do_single else None
        run_n = launch(nproc, "distributed") if do_multi else None
    report_progress("checks", logs={f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items()})
    evidence_model.evaluate([r for r in (run1, run_n) if r], job, cfg, synthetic)  # rank 0's model, held-out data
    findings = _findings(cfg, run1, run_n, epochs, skip_reason, mode, ref)
    for check_id in cfg["checks"]:  # every check of assignment.json, so the report is out of its total
        finding = findings.get(check_id) or ddp.Finding(CheckStatus.ERROR, "error")
        report.add(checks_runner.render(render, cfg["checks"][check_id], check_id, finding))  # isolated
    report.plots = _plots(run1, run_n, findings.get("speedup"))
    report.logs = {f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items() if v}
    report.timings = {"total_s": round(time.monotonic() - started, 2), "epochs": epochs,
                      **{f"run_n{r.nproc}_s": round(r.result.wall_s, 2) for r in (run1, run_n) if r}}
    report.sandbox = {"layers": (run_n or run1).result.layers if (run_n or run1) else []}
    report.summary = summary(report, run_n)
    return report


def _calibrating(minutes: int) -> None:
    report_progress("calibrating", logs={}, minutes=minutes,
                    message=text(f"正在本机校准参考解的速度，大约 {minutes} 分钟。",
                                 f"calibrating, about {minutes} min: measuring the reference solution's speed on this host."))


NOT_DISTRIBUTED_LEAD = {
    "no_process_group": text(
        "你的脚本还不是分布式的：各进程没有组成进程组，只是同一个单卡训练跑了多份。"
        "先在开头调用 dist.init_process_group()（CPU 上用 gloo），再用 DistributedDataParallel 包装模型。",
        "Your script is not distributed yet: its processes never formed a process group, they are copies of one "
        "single-card run. First call dist.init_process_group() at the start (gloo on CPU), then wrap the model in "
        "DistributedDataParallel."),
    "no_sync": text(
        "你的脚本还不是分布式的：进程组已建立，但各进程之间没有同步梯度。先用 DistributedDataParallel(model) 包装模型。",
        "Your script is not distributed yet: the process group exists, but the processes never synchronise "
        "gradients. First wrap the model in DistributedDataParallel(model)."),
}


def summary(report: GradeReport, run_n) -> dict[str, str]:
    """The report's first lines: a lead sentence when the script is not distributed, the score, what to fix."""
    total = report.max_score
    failed = [c.id for c in report.checks if c.status in (CheckStatus.FAIL, CheckStatus.WARN)]
    elsewhere = [c.id for c in report.checks if not_graded_here(c)]
    zh = f"得分 {report.score:g}/{total:g}。" + (f"需要处理：{', '.join(failed)}。" if failed else "全部通过。")
    en = f"Score {report.score:g}/{total:g}. " + (f"To fix: {', '.join(failed)}." if failed else "Everything passed.")
    if elsewhere:
        zh += f"本机无法评判：{', '.join(elsewhere)}（这几项不计分，需要在能评判的主机上重新评分）。"
        en += f" Not graded here: {', '.join(elsewhere)} (no points from this host; a host that can must grade them)."
    lead = None
    if run_n is not None and ddp.trained(run_n) and run_n.all_finished:
        if not ddp.process_group(run_n):
            lead = NOT_DISTRIBUTED_LEAD["no_process_group"]
        elif ddp.sync_kind(run_n) is None:
            lead = NOT_DISTRIBUTED_LEAD["no_sync"]
    if lead:
        zh, en = lead["zh"] + zh, lead["en"] + " " + en
    return text(zh, en)


def wall_limits(base: dict[str, Any], script: Path) -> dict[str, Any]:
    """The sandbox limits for this script: ``compile_extra_s`` more wall time if it calls torch.compile.

    Compiling happens in the first steps, which the throughput already leaves out; the
    extra time keeps it from eating the wall-clock limit of a correct script on a slow host.
    """
    out = dict(base)
    extra = float(out.pop("compile_extra_s", 0) or 0)
    try:
        uses_compile = b"compile(" in script.read_bytes()
    except OSError:
        uses_compile = False
    if extra and uses_compile and "wall_s" in out:
        out["wall_s"] = float(out["wall_s"]) + extra
    return out


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


def _findings(cfg, run1, run_n, epochs, skip_reason, mode, ref=None) -> dict[str, ddp.Finding]:
    """One finding per id of assignment.json's ``checks``, from the code registered under that id."""
    skipped = ddp.Finding(CheckStatus.SKIP, "host", {"reason": skip_reason or text("", "")})
    ctx = Context(cfg=cfg, run1=run1, run_n=run_n, epochs=epochs, ref=ref, mode=mode)
    out: dict[str, ddp.Finding] = {}
    for check_id in cfg["checks"]:
        needed = run1 if check_id == "run.single" else run_n
        out[check_id] = (checks_runner.run_check(ddp.CHECKS[check_id], ctx, finding_cls=ddp.Finding)  # isolated
                         if needed is not None else skipped)
    return out


@ddp.CHECKS.check("speedup")
def _speedup_check(ctx: Context) -> ddp.Finding:
    return _speedup(ctx.cfg, ctx.run1, ctx.run_n, ctx.ref, ctx.mode)


def _speedup(cfg, run1, run_n, ref, mode: str = "cpu") -> ddp.Finding:
    if not (ddp.trained(run1) and ddp.trained(run_n)):
        return ddp.untrained(run_n if not ddp.trained(run_n) else run1)
    if not (run1.all_finished and run_n.all_finished):
        return ddp.NOT_FINISHED
    if not ddp.process_group(run_n) or ddp.sync_kind(run_n) is None:
        return ddp.NOT_DISTRIBUTED  # N copies of one run: no speedup to credit
    t1, tn = ddp.throughput(run1), ddp.throughput(run_n)
    if not t1 or not tn:
        return ddp.Finding(CheckStatus.SKIP, "too_short")
    scfg = cfg["checks"]["speedup"]
    status, key, nums, fraction = ddp.judge_speed(t1["steady"], tn["steady"], run_n.nproc, ref, scfg["bands"],
                                                  fast_mode(), t1.get("idle") if mode == "cpu" else None)  # GPU waits look idle
    ev = {"throughput_1": round(t1["steady"], 2), "throughput_n": round(tn["steady"], 2),
          "loop_1": round(t1["loop"], 2), "loop_n": round(tn["loop"], 2), "unique_fraction": tn["unique_fraction"],
          "expected_gpu": scfg["chapter_expectation"], **nums, "band": key,
          "load_dependent": True}  # the one verdict that may move with the host's load
    if ref:
        ev["reference_at"] = ref.get("at")
    params = {"raw": f"{nums['raw']:.2f}", "t1": f"{t1['steady']:.0f}", "tn": f"{tn['steady']:.0f}", "n": run_n.nproc,
              "expect": ev["expected_gpu"], "max": f"{run_n.nproc * float(scfg['bands'].get('max_efficiency', 1.25)):.2f}"}
    if "idle_1" in nums:
        params.update(idle1=f"{100 * nums['idle_1']:.0f}%", max_idle=f"{100 * float(scfg['bands'].get('max_idle_single', 0.3)):.0f}%")
    if "reference" in nums:
        params.update(ref=f"{nums['reference']:.2f}", ref_t1=f"{nums['ref_t1']:.0f}", ref_tn=f"{nums['ref_tn']:.0f}",
                      r1=f"{nums['ratio_1']:.2f}", rn=f"{nums['ratio_n']:.2f}",
                      norm=f"{nums.get('normalised', 0):.2f}", min_raw=f"{float(scfg['bands'].get('min_raw', 1.0)):.1f}")
    return ddp.Finding(status, key, params, ev, fraction)


def _plots(run1, run_n, speed: ddp.Finding | None) -> dict[str, Any]:
    ev = speed.evidence if speed else {}
    loss = {"n1.rank0": ddp.loss_series(run1)}
    if run_n:
        loss.update({f"n{run_n.nproc}.rank{r}": ddp.loss_series(run_n, r) for r in range(run_n.nproc)})
    return {"throughput": {"nproc": [1, run_n.nproc if run_n else 0],
                           "samples_per_s": [ev.get("throughput_1"), ev.get("throughput_n")]},
            "loss": loss}
