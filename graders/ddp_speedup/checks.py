"""Homework 1's registry: each id of its ``assignment.json`` and the shared check that judges it.

The checks themselves (``graders.checks.ddp``) serve every DDP-family homework; this module says
which of them homework 1 asks for, with what arguments, and what each rests on.
``graders.ddp_speedup.grader`` registers "speedup" here too.
"""
from __future__ import annotations

from coursework.report import CheckStatus, text
from graders.checks.ddp import (Finding, batch_info, check_coverage, check_coverage_alone, check_disjoint,
                                check_grad_sync, check_no_sync, check_rank0_io, check_reshuffle, check_run,
                                check_syncbn, trained, untrained)
from graders.checks.registry import Context, Registry

CHECKS = Registry()  # homework 1's checks by id


# What each check rests on (graders.evidence): shown with its evidence, so a reader sees at once what the
# student's process could have chosen. Every verdict also needs training, which rests on the grader's own
# evaluation of rank 0's model where it can be scored.
_DATALOADER = text("脚本之内、已核对：DataLoader 取到的样本下标，对照评分程序在每张合成图片里留下的标记在模型输入处读出的样本"
                   "（训练模式与否都读）；某个 rank 的标记读不出时不得分",
                   "inside, cross-checked: indices the DataLoader fetched, against the samples read at the model's input "
                   "from the marks the grader put in every synthetic image (in train or eval mode); a rank whose marks "
                   "cannot be read earns nothing")
RESTS_ON = {
    "run.single": text("脚本之外：退出码、启动器的计时、评分程序对模型的评估（无法评估时交由助教复核）；脚本之内：结束标记",
                       "outside: exit codes, launcher wall clock, model scored by the grader (held for review where it "
                       "cannot be scored); inside: end markers"),
    "run.distributed": text("脚本之外：退出码、启动器的计时、评分程序对模型的评估（无法评估时交由助教复核）；脚本之内：结束标记",
                            "outside: exit codes, launcher wall clock, model scored by the grader (held for review where "
                            "it cannot be scored); inside: end markers"),
    "sampler.disjoint": text(_DATALOADER["zh"] + "；每个 rank 的模型每一步训练的样本数对照各 rank 一起训练的 1/N，"
                             "并列出启动器测得的各 rank CPU 时间（脚本之外）",
                             _DATALOADER["en"] + "; the samples each rank's model trained on in each step against "
                             "1/N of what the ranks trained on together, beside each rank's CPU time as the launcher "
                             "measured it (outside)"),
    "sampler.coverage": _DATALOADER,
    "sampler.reshuffle": _DATALOADER,
    "ddp.grad_sync": text("脚本之内、已核对：每一步之后比对正在学习的模型（接收训练 batch 并做了 backward 的模块）的参数，"
                          "并对照作业的回环网络流量与每步环形 all-reduce 应传的字节数（脚本之外，仅 gloo）",
                          "inside, cross-checked: the parameters of the model that learned (the module that took the "
                          "training batches and ran backward) compared after every step, against the job's loopback "
                          "traffic and what a ring all-reduce moves every step (outside, gloo only)"),
    "io.rank0_only": text("脚本之外：启动器截获的各 rank 输出、工作目录里留下的文件；脚本之内：哪个 rank 打开了它们",
                          "outside: each rank's captured output, files left in the work folder; "
                          "inside: which rank opened them"),
    "ddp.syncbn": text("脚本之内：正在学习的模型里的 (Sync)BatchNorm 层，以及任何优化器训练的 (Sync)BatchNorm 层",
                       "inside: the (Sync)BatchNorm layers of the model that learned, and those any optimizer trains"),
    "ddp.no_sync": text("脚本之内：每步的 backward 次数与 DDP bucket", "inside: backward passes and DDP buckets per step"),
    "batch.global": text("脚本之内：batch 大小与学习率", "inside: batch sizes and learning rates"),
}


CHECKS.rests_on.update(RESTS_ON)  # every finding of these checks says what it rests on


# -- the registry: each id of homework 1's assignment.json and the code that judges it -----------------
@CHECKS.check("run.single")
def _run_single(ctx: Context) -> Finding:
    return check_run(ctx.run1)


@CHECKS.check("run.distributed")
def _run_distributed(ctx: Context) -> Finding:
    return check_run(ctx.run_n)


@CHECKS.check("sampler.disjoint")
def _sampler_disjoint(ctx: Context) -> Finding:
    return check_disjoint(ctx.run_n)


@CHECKS.check("sampler.coverage")
def _sampler_coverage(ctx: Context) -> Finding:
    finding = check_coverage(ctx.run_n, ctx.epochs)
    if finding.status == CheckStatus.PASS:  # every run the grader made must cover the data, not only the N-process one
        finding = check_coverage_alone(ctx.run1, ctx.run_n.nproc, ctx.epochs) or finding
    return finding


@CHECKS.check("sampler.reshuffle")
def _sampler_reshuffle(ctx: Context) -> Finding:
    return check_reshuffle(ctx.run_n)


@CHECKS.check("ddp.grad_sync")
def _grad_sync(ctx: Context) -> Finding:
    return check_grad_sync(ctx.run_n)


@CHECKS.check("io.rank0_only")
def _rank0_io(ctx: Context) -> Finding:
    return check_rank0_io(ctx.run_n, ctx.epochs, int(ctx.cfg["checks"]["io.rank0_only"]["extra_prints"]))


@CHECKS.check("ddp.syncbn")
def _syncbn(ctx: Context) -> Finding:
    finding = check_syncbn(ctx.run_n)
    lines = ctx.run_n.evidence.get("syncbn_gpu_only") if ctx.run_n else None
    if finding.key == "plain_bn" and ctx.mode != "gpu" and lines:  # converted only with a GPU (graders.ddp_speedup.gpu_only)
        reason = text("脚本只在有 GPU 时才转换为 SyncBatchNorm", "the script converts to SyncBatchNorm only when a GPU is present")
        finding = Finding(CheckStatus.SKIP, "gpu_only", {**finding.params, "line": lines[0], "reason": reason},
                          {**finding.evidence, "gpu_only_lines": lines}, fallback="host")
    guarded = ctx.run_n.evidence.get("syncbn_gpu_guarded") if ctx.run_n else None
    if finding.key == "plain_bn" and guarded:  # a GPU condition that, with the script's defaults, is false there too
        finding = Finding(CheckStatus.WARN, "gpu_guard_off", {**finding.params, "line": guarded[0]},
                          {**finding.evidence, "gpu_guarded_lines": guarded}, fallback="plain_bn")
    return finding


@CHECKS.check("ddp.no_sync")
def _no_sync(ctx: Context) -> Finding:
    return check_no_sync(ctx.run_n)


@CHECKS.check("batch.global")
def _batch_global(ctx: Context) -> Finding:
    return batch_info(ctx.run1, ctx.run_n) if trained(ctx.run_n) else untrained(ctx.run_n)
