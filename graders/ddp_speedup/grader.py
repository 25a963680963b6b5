"""Grader of homework 1: run the script with torchrun on 1 and N processes and check it.

Entry point ``grade(assignment, job, files, mode)`` (named in ``assignment.json``).
Environment: ``DISTGRADE_FAST=1`` trains ``fast_epochs`` and does not judge speed
against the reference (the samples test; a held-back 1-process run still fails);
``DISTGRADE_LIMITS`` is a JSON object overriding sandbox limits (per-sample ``limits`` in
``expected.json``); ``DISTGRADE_VAR_DIR`` holds calibrations (``graders.ddp_speedup.calibration``).

Every id of ``assignment.json``'s ``checks`` gets a result (``graders.checks.registry``), so the
report is always out of the assignment's total. Speed is compared like with like against the
reference solution measured on this host under an exclusive host lock; this grading holds the
lock shared while its own runs are timed.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from coursework.assignments import Assignment
from coursework.progress import report_progress
from coursework.report import CheckResult, CheckStatus, GradeReport, ReportStatus, text
from graders import checks_runner, cifar, early_stop, gpu_slots, host_modules, integrity, torchrun
from graders.checks import ddp, sync, timing
from graders.checks.registry import Context
from graders.checks.render import not_graded_here, render
from graders.ddp_speedup import calibration, checks, floor, gpu_only, speed
from graders.ddp_speedup import job as ddp_job
from graders.evidence import model as evidence_model


# Skipped for a reason that is no one's fault -> the check that gets its points: random draws have no
# epochs (coverage and reshuffle: judged by disjoint), and a SyncBatchNorm conversion written to run only
# with a GPU cannot run on a CPU host (the model's consistency across ranks is judged by grad_sync).
MOVED_WHEN_SKIPPED = {"gpu_only": "ddp.grad_sync"}


def fast_mode() -> bool:
    return os.environ.get("DISTGRADE_FAST") == "1"


def gpu_plan(mode: str, nproc: int, available: int) -> tuple[bool, bool, dict[str, str] | None]:
    """(run single, run distributed, skip reason in zh and en) for a host with ``available`` GPUs."""
    if mode != "gpu":
        return True, True, None
    reason = gpu_slots.shortfall(nproc, available)
    return available >= 1, reason is None, reason


def grade(assignment: Assignment, job: Path, files: list[Path], mode: str = "cpu") -> GradeReport:
    """Grade one submitted script; see the module docstring."""
    cfg = {**assignment.raw, "_path": str(assignment.path), "_id": assignment.id}
    started = time.monotonic()
    report = GradeReport(assignment=assignment.id, mode=mode)
    nproc = int(cfg["nproc"])
    epochs = int(cfg["fast_epochs"] if fast_mode() else cfg["epochs"][mode])
    os.chmod(job, 0o711)
    script = ddp_job.stage_script(files[0], job)
    host_modules.check_script(script, cfg)  # an import the README allows and this host lacks: not graded here
    data_dir, synthetic = ddp_job.data_dir(job, mode, cfg)
    limits = torchrun.make_limits(wall_limits(assignment.limits.get(mode, {}), script),
                                  json.loads(os.environ.get("DISTGRADE_LIMITS", "{}")))
    gpus = gpu_slots.job_gpus() if mode == "gpu" else 0
    do_single, do_multi, skip_reason = gpu_plan(mode, nproc, gpus)

    def launch(n: int, tag: str, stop_when=None, run_epochs: int = epochs, root: str | None = None):
        report_progress(f"run.{tag}", logs={})
        return torchrun.run(script, n, root=job / (root or f"n{n}"), data_dir=data_dir, epochs=run_epochs,
                            limits=limits, mode=mode, synthetic=synthetic is not None,
                            gpus=gpu_slots.assigned(n) if mode == "gpu" else None, progress=f"run.{tag}",
                            stop_when=stop_when)

    # The reference is measured between jobs (graders.ddp_speedup.calibration), never inside this one: without
    # an accepted value speed is "pending calibration" and re-scored when one lands.
    ref = calibration.current(cfg, mode) if do_single and do_multi and not fast_mode() else None
    stop_cfg = cfg.get("early_stop", {})
    min_steps, max_steps = int(stop_cfg.get("min_steps", 0)), int(stop_cfg.get("max_steps", 200))
    extra: list = []
    with calibration.host_shared(on_wait=_calibration_yielding):
        # N processes first: a script that is not distributed is stopped once that is clear, and
        # its 1-process run is then bounded the same way.
        run_n = launch(nproc, "distributed", early_stop.either(early_stop.not_distributed(nproc, min_steps, max_steps),
                                                               early_stop.not_synchronised(nproc, min_steps, max_steps))
                       if min_steps else None) if do_multi else None
        bounded = run_n is not None and run_n.stopped is not None  # either early stop: the 1-process run too
        run1 = launch(1, "single", early_stop.enough_steps(1, min_steps, max_steps) if bounded else None) if do_single else None
        if _speed_counts(cfg, run1, run_n, ref, nproc):
            extra = _repeat_pairs(cfg, launch, nproc)
    host_modules.check_raised((r.ranks[k].exception for r in (run1, run_n) if r for k in r.ranks), cfg)
    report_progress("checks", logs={f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items()})
    evidence_model.evaluate([r for r in (run1, run_n) if r], job, cfg, synthetic)  # rank 0's model, held-out data
    _hold_unscored(job, (run1, run_n))
    if synthetic is not None:  # the marks the harness read are numbered 0..N-1 in the training files (graders.checks.inputs)
        for r in (run1, run_n):
            if r:
                r.evidence["inputs"] = {"train_size": cifar.train_size(data_dir)}
    if run_n is not None:  # a SyncBatchNorm conversion that only runs with a GPU (graders.ddp_speedup.gpu_only)
        judged = gpu_only.judge(script.read_text(encoding="utf-8", errors="replace"), run_n.nproc)
        run_n.evidence["syncbn_gpu_only"], run_n.evidence["syncbn_gpu_guarded"] = judged["exempt"], judged["guarded"]
    findings = _findings(cfg, run1, run_n, epochs, skip_reason, mode, ref, extra)
    for check_id in cfg["checks"]:  # every check of assignment.json, so the report is out of its total
        finding = findings.get(check_id) or ddp.Finding(CheckStatus.ERROR, "error")
        report.add(checks_runner.render(render, cfg["checks"][check_id], check_id, finding))  # isolated
    speed.settle_points(report.checks, cfg["checks"].get("speedup", {}))
    for c in report.checks:  # a check that cannot apply here gives its points to the one that judges the same thing
        target = MOVED_WHEN_SKIPPED.get(c.evidence.get("key")) if c.status == CheckStatus.SKIP else None
        if target:
            speed.move_points(report.checks, c.id, {target: c.max_points})
    report.plots = _plots(run1, run_n, findings.get("speedup"))
    report.logs = {f"n{r.nproc}.{k}": v for r in (run1, run_n) if r for k, v in r.logs.items() if v}
    report.timings = {"total_s": round(time.monotonic() - started, 2), "epochs": epochs,
                      **{f"run_n{r.nproc}_s": round(r.result.wall_s, 2) for r in (run1, run_n) if r},
                      **({"speed_pairs_s": round(sum(a.result.wall_s + b.result.wall_s for a, b in extra), 2)}
                         if extra else {})}
    report.sandbox = {"layers": (run_n or run1).result.layers if (run_n or run1) else []}
    report.summary = summary(report, run_n)
    return report


def _hold_unscored(job: Path, runs) -> None:
    """A run that trained and finished, whose model the grader could not score, is held for review with
    the reason (``graders.evidence.model.unscored``): the model is the floor under every check, and a
    floor that cannot be seen must not pass unseen. The grade is computed as usual for the instructor."""
    for run in runs:
        why = evidence_model.unscored(run) if run is not None and ddp.trained(run) else None
        if why:
            integrity.append_events(job, [integrity.event(
                "grader", "model_unscored", f"the {run.nproc}-process run's final model could not be scored: {why['en']}")],
                tag=f"n{run.nproc}")


def _calibration_yielding() -> None:
    report_progress("calibrating", logs={}, minutes=1,
                    message=text("本机正在测量参考解的速度，它会在当前这一次运行结束前让出主机（几秒钟）。",
                                 "the reference solution's speed is being measured on this host; it gives the host "
                                 "up to this grading within seconds."))


def _speed_counts(cfg, run1, run_n, ref, nproc: int) -> bool:
    """Will the speed check's score depend on measured speed? Only then are repeated pairs run."""
    if fast_mode() or run1 is None or run_n is None or run_n.stopped or run1.stopped:
        return False
    if not (run1.all_finished and run_n.all_finished and ddp.process_group(run_n) and ddp.sync_kind(run_n)):
        return False
    if not (timing.throughput(run1) and timing.throughput(run_n)):
        return False
    scfg = cfg["checks"]["speedup"]
    bar = speed.min_reference_speedup(scfg.get("host_gate", {}), nproc, ref, float(scfg["bands"].get("pass", 0.8)),
                                      int(scfg.get("repeat", {}).get("pairs", 1)))
    return ref is None or ref["speedup"] >= bar  # pending: keep pairs to re-score


def _repeat_pairs(cfg, launch, nproc: int) -> list[tuple]:
    """``repeat.pairs - 1`` more 1-process / N-process pairs of ``repeat.epochs`` epochs, interleaved."""
    rep = cfg["checks"]["speedup"].get("repeat", {})
    out = []
    for i in range(max(0, int(rep.get("pairs", 1)) - 1)):
        pair = tuple(launch(n, "speed", run_epochs=int(rep.get("epochs", 2)), root=f"speed{i}-n{n}") for n in (1, nproc))
        out.append(pair)
    return out


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


STOPPED_NOTE = text(
    "多进程运行在每个 rank 至少训练了 {steps} 步后被评分器提前停止：此时已能确定脚本不是分布式的，继续运行不会改变任何一项的结果；"
    "1 进程运行也只检查到同样的程度。",
    "The multi-process run was stopped by the grader after at least {steps} steps on every rank: by then it was clear the "
    "script is not distributed, and running on could not change any check; the 1-process run was checked as far.")


STOPPED_UNSYNCED_NOTE = text(
    "多进程运行在每个 rank 至少训练了 {steps} 步、两轮数据之后被评分器提前停止：各 rank 优化器更新的参数已经不同，又没有任何梯度同步，"
    "继续运行也改变不了梯度同步的结论；其余各项按已运行的部分评判（只在 rank 0 输出一项看的是这两轮里的输出和文件）。"
    "1 进程运行也只检查到同样的程度。梯度同步正确的脚本会完整运行。",
    "The multi-process run was stopped by the grader after at least {steps} steps and two epochs on every rank: the "
    "parameters the ranks' optimizers step already differed and nothing synchronised their gradients, which running on "
    "could not change. The other checks judged the run so far (rank-0-only output: the output and files of those two "
    "epochs); the 1-process run was checked as far. A script that synchronises its gradients is run to the end.")


def run_n_steps(run) -> int:
    """The fewest optimizer steps any rank of ``run`` reported (what an early stop was judged on)."""
    return min((early_stop.steps_taken(s.records) for s in run.ranks.values()), default=0)


def summary(report: GradeReport, run_n) -> dict[str, str]:
    """The report's first lines: a lead sentence when the script is not distributed, the score, what to fix."""
    total = report.max_score
    failed = [c.id for c in report.checks if c.status in (CheckStatus.FAIL, CheckStatus.WARN)]
    elsewhere = [c.id for c in report.checks if not_graded_here(c) and c.evidence.get("key") not in speed.NOT_GRADED_KEYS]
    zh = f"得分 {report.score:g}/{total:g}。" + (f"需要处理：{', '.join(failed)}。" if failed else "全部通过。")
    en = f"Score {report.score:g}/{total:g}. " + (f"To fix: {', '.join(failed)}." if failed else "Everything passed.")
    if elsewhere:
        zh += f"本机无法评判：{', '.join(elsewhere)}（这几项不计分，需要在能评判的主机上重新评分）。"
        en += f" Not graded here: {', '.join(elsewhere)} (no points from this host; a host that can must grade them)."
    zh, en = speed.summary_note(report, zh, en)
    if run_n is not None and run_n.stopped:
        note = STOPPED_UNSYNCED_NOTE if run_n.stopped == early_stop.NO_SYNC else STOPPED_NOTE
        zh += note["zh"].format(steps=run_n_steps(run_n))
        en += " " + note["en"].format(steps=run_n_steps(run_n))
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


def _findings(cfg, run1, run_n, epochs, skip_reason, mode, ref=None, extra=()) -> dict[str, ddp.Finding]:
    """One finding per id of assignment.json's ``checks``, from the code registered under that id."""
    skipped = ddp.Finding(CheckStatus.SKIP, "host", {"reason": skip_reason or text("", "")})
    ctx = Context(cfg=cfg, run1=run1, run_n=run_n, epochs=epochs, ref=ref, mode=mode, extra={"speed_pairs": list(extra)})
    out: dict[str, ddp.Finding] = {}
    for check_id in cfg["checks"]:
        needed = run1 if check_id == "run.single" else run_n
        judge = floor.judged(check_id, checks.CHECKS[check_id])  # below the model floor: its own cause, 0 points
        out[check_id] = (checks_runner.run_check(judge, ctx, finding_cls=ddp.Finding)  # isolated
                         if needed is not None else skipped)
    if run_n is not None and run_n.stopped == early_stop.NO_PROCESS_GROUP:
        _say_stopped(out, run1, run_n)
    elif run_n is not None and run_n.stopped == early_stop.NO_SYNC:
        _say_stopped_unsynced(out, run1, run_n)
    return out


def _say_stopped_unsynced(out: dict[str, ddp.Finding], run1, run_n) -> None:
    """A run with a process group whose ranks already trained apart, stopped after two epochs: gradient sync
    is judged on the parameters compared during training (what stopped it); the run check says how far it
    got; the other checks judged the epochs seen, and the summary says so."""
    steps = run_n_steps(run_n)
    during = sync.compare_params(run_n) or {}
    bad = during.get("differ") or {}
    if "ddp.grad_sync" in out and bad:
        out["ddp.grad_sync"] = ddp.Finding(CheckStatus.FAIL, "no_ddp_during", {"rank": bad.get("rank"),
                                           "diff": f"{float(bad.get('diff') or 0):.2e}", "step": bad.get("step")},
                                           {"stopped": run_n.stopped, "compared_steps": during.get("compared", [])[:16],
                                            "differ_at_step": bad.get("step"), "sync": None,
                                            "rests_on": checks.RESTS_ON["ddp.grad_sync"]}, fallback="no_ddp")
    f = out.get("run.distributed")
    if f is not None and f.key == "ok":
        out["run.distributed"] = ddp.Finding(f.status, "ok_stopped", {**f.params, "steps": steps},
                                             {**f.evidence, "stopped": run_n.stopped, "steps": steps}, fallback="ok")
    f = out.get("run.single")
    if f is not None and f.key == "ok" and run1 is not None and run1.stopped:
        out["run.single"] = ddp.Finding(f.status, "ok_stopped", {**f.params, "steps": run_n_steps(run1)},
                                        {**f.evidence, "stopped": run1.stopped})


def _say_stopped(out: dict[str, ddp.Finding], run1, run_n) -> None:
    """Findings of a run the grader stopped early say what was seen, not what a finished run would show."""
    steps = run_n_steps(run_n)
    if "ddp.grad_sync" in out:  # no end-of-run digests to compare; nothing synchronised is already known
        out["ddp.grad_sync"] = ddp.Finding(CheckStatus.FAIL, "no_sync_stopped", {"n": run_n.nproc, "steps": steps},
                                           {"stopped": run_n.stopped, "process_group": False, "sync": None})
    f = out.get("run.distributed")
    if f is not None and f.key == "no_process_group":
        out["run.distributed"] = ddp.Finding(f.status, "no_process_group_stopped", {**f.params, "steps": steps},
                                             {**f.evidence, "stopped": run_n.stopped, "steps": steps})
    f = out.get("run.single")
    if f is not None and f.key == "ok" and run1 is not None and run1.stopped:
        out["run.single"] = ddp.Finding(f.status, "ok_stopped", {**f.params, "steps": run_n_steps(run1)},
                                        {**f.evidence, "stopped": run1.stopped})


@checks.CHECKS.check("speedup")
def _speedup_check(ctx: Context) -> ddp.Finding:
    return _speedup(ctx.cfg, ctx.run1, ctx.run_n, ctx.ref, ctx.mode, ctx.extra.get("speed_pairs", []))


def _speedup(cfg, run1, run_n, ref, mode: str = "cpu", extra=()) -> ddp.Finding:
    if not (ddp.trained(run1) and ddp.trained(run_n)):
        return ddp.untrained(run_n if not ddp.trained(run_n) else run1)
    if not (run1.all_finished and run_n.all_finished):
        return ddp.NOT_FINISHED
    if not ddp.process_group(run_n) or ddp.sync_kind(run_n) is None:
        return ddp.NOT_DISTRIBUTED  # N copies of one run: no speedup to credit
    t1, tn = timing.throughput(run1), timing.throughput(run_n)
    if not t1 or not tn:
        return ddp.Finding(CheckStatus.SKIP, "too_short")
    pairs = [{"t1": round(t1["steady"], 3), "tn": round(tn["steady"], 3)}]
    idles = [t1.get("idle")]
    for r1, rn in extra:  # repeated pairs: one that failed to measure is left out, not counted as 0
        e1, en = timing.throughput(r1), timing.throughput(rn)
        if e1 and en:
            pairs.append({"t1": round(e1["steady"], 3), "tn": round(en["steady"], 3)})
            idles.append(e1.get("idle"))  # a script that sleeps only in the short runs is caught there too
    known = [i for i in idles if i is not None]
    ev = {"throughput_1": round(t1["steady"], 2), "throughput_n": round(tn["steady"], 2),
          "loop_1": round(t1["loop"], 2), "loop_n": round(tn["loop"], 2), "unique_fraction": tn["unique_fraction"],
          "nproc": run_n.nproc,
          "idle_1_raw": max(known) if known and mode == "cpu" else None}  # GPU waits look idle
    return speed_finding(cfg, pairs, ref, ev)


def speed_finding(cfg: dict, pairs: list[dict[str, float]], ref, ev: dict[str, Any]) -> ddp.Finding:
    """The speed check's finding from measured ``pairs``: at grading time, or re-scored from a stored
    report once a calibration lands (``rescore``), without running the student's code again."""
    scfg = cfg["checks"]["speedup"]
    n = int(ev["nproc"])
    v = speed.judge(pairs, n, ref, scfg["bands"], scfg.get("host_gate", {}), ev.get("idle_1_raw"),
                    fast=fast_mode())
    evidence = {**ev, **v.evidence, "expected_gpu": scfg["chapter_expectation"], "band": v.key,
                "load_dependent": True}  # the one verdict that may move with the host's load
    # one pair shown everywhere (message, evidence, chart): the middle pair the speedup comes from
    evidence["throughput_1"], evidence["throughput_n"] = evidence.pop("t1"), evidence.pop("tn")
    if ref:
        evidence["reference_at"] = ref.get("at")
    return ddp.Finding(v.status, v.key, speed.message_params(v, n, scfg), evidence, v.fraction)


def rescore(report: dict[str, Any], assignment: Assignment, ref: dict[str, Any]) -> dict[str, Any] | None:
    """A stored report whose speed was "pending calibration", re-scored against ``ref`` (None: nothing to do).

    Only the speed check changes (and the points it moves); the student's code does not run again.
    """
    cfg = {**assignment.raw, "_path": str(assignment.path), "_id": assignment.id}
    checks = [CheckResult.from_dict(c) for c in report.get("checks", [])]
    old = next((c for c in checks if c.id == "speedup"), None)
    if old is None or old.evidence.get("key") != "pending_calibration" or not old.evidence.get("pairs"):
        return None
    keep = ("throughput_1", "throughput_n", "loop_1", "loop_n", "unique_fraction", "nproc", "idle_1_raw")
    finding = speed_finding(cfg, old.evidence["pairs"], ref, {k: old.evidence.get(k) for k in keep})
    new = checks_runner.render(render, cfg["checks"]["speedup"], "speedup", finding)
    checks = [new if c.id == "speedup" else c for c in checks]
    speed.settle_points(checks, cfg["checks"]["speedup"])
    rep = GradeReport.from_dict(report)
    rep.checks = checks
    if rep.status == ReportStatus.NEEDS_REVIEW:  # the review's own summary stays; the held score follows
        rep.integrity["computed_score"] = rep.computed_score
    else:
        rep.summary = summary(rep, None)
    return {**report, **rep.to_dict(), "rescored": {"speedup_at": time.time(), "reference_at": ref.get("at")}}


def _plots(run1, run_n, speed: ddp.Finding | None) -> dict[str, Any]:
    ev = speed.evidence if speed else {}
    loss = {"n1.rank0": timing.loss_series(run1)}
    if run_n:
        loss.update({f"n{run_n.nproc}.rank{r}": timing.loss_series(run_n, r) for r in range(run_n.nproc)})
    return {"throughput": throughput_plot(ev, run_n.nproc if run_n else 0), "loss": loss}


def throughput_plot(ev: dict[str, Any], nproc: int) -> dict[str, Any]:
    """The throughput chart: the pair the speed check's message names (``throughput_1``, ``_n``)."""
    return {"nproc": [1, nproc], "samples_per_s": [ev.get("throughput_1"), ev.get("throughput_n")]}
