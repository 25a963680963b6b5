"""Homework 1's checks under the model floor: nothing earns points, yet each check says what it saw.

Below the floor (``graders.evidence.model.below_floor``: rank 0's final model scored at chance on the
grader's held-out data) the run did not train, and no check has anything to credit. Saying only that
hides the cause a check found by its own evidence (a forward through the module DDP wraps is named by
``ddp.grad_sync``, and is often why the model learned nothing). So a check is judged once more with
the floor set aside, and its finding becomes a fail with 0 points that keeps the check's own words:

- a check that fails or warns by its own evidence: its cause and fix first, then the floor;
- a check whose own part passed: that it looked right, its message, then that a model that learned
  nothing earns nothing;
- a check with nothing of its own to say (skipped, information only, no training of its own): the
  floor's message alone, as before.

The points never rest on the second judgement: every finding this module returns is a fail.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from coursework.report import CheckStatus, text
from graders.checks import ddp
from graders.checks.registry import Context
from graders.evidence import model

# the checks' own gates that mean "no training": under the floor, the floor says it better
_NOTHING_OF_ITS_OWN = ("no_training", "params_frozen", "model_untrained")

LOOKED_RIGHT = text("这一项本身看起来没问题：", "This part looked right on its own:")
BUT_EARNS_NOTHING = text(
    "但评分器用没有见过的数据评估 {n} 进程运行中 rank 0 最终的模型，准确率只有 {acc}（至少应有 {floor}）："
    "什么也没学到的模型不得分，这一项记 0 分（原因见 {run}）。",
    "But the grader scored rank 0's final model of the {n}-process run on data it never saw at {acc} accuracy "
    "(at least {floor} expected): a model that learned nothing earns nothing, so this check gets 0 points (see {run}).")
ALSO_LEARNED_NOTHING = text(
    "此外，评分器用没有见过的数据评估 {n} 进程运行中 rank 0 最终的模型，准确率只有 {acc}（至少应有 {floor}）："
    "模型什么也没学到，这一项记 0 分。",
    "Besides, the grader scored rank 0's final model of the {n}-process run on data it never saw at {acc} accuracy "
    "(at least {floor} expected): the model learned nothing, so this check gets 0 points.")


def floor_run(check_id: str, ctx: Context):
    """The run whose model is the floor under ``check_id`` and is below it, or None. The run checks judge
    their own run's model themselves; speed rests on both runs, every other check on the N-process run."""
    if check_id.startswith("run."):
        return None
    runs = (ctx.run_n, ctx.run1) if check_id == "speedup" else (ctx.run_n,)
    return next((r for r in runs if r is not None and model.below_floor(r)), None)


def judged(check_id: str, fn: Callable[[Context], ddp.Finding]) -> Callable[[Context], ddp.Finding]:
    """``fn`` (a registered check), which under the floor says what it saw and earns nothing."""
    def check(ctx: Context) -> ddp.Finding:
        run = floor_run(check_id, ctx)
        if run is None:
            return fn(ctx)
        with model.floor_set_aside():
            own = fn(ctx)
        return under(own, run)
    check.__name__ = getattr(fn, "__name__", check_id)
    return check


def under(own: ddp.Finding, run) -> ddp.Finding:
    """``own`` (a check's finding with the floor set aside) as a fail with 0 points below ``run``'s floor."""
    rests_on = own.evidence.get("rests_on")
    floor = {**ddp.model_params(run), "n": run.nproc}
    evidence = {"model_floor": {"own_status": own.status.value, "own_key": own.key, **floor,
                                "model": (run.evidence or {}).get("model")}}
    if own.status not in (CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL) or own.key in _NOTHING_OF_ITS_OWN:
        plain = dataclasses.replace(ddp.LEARNED_NOTHING, params=floor)
        return dataclasses.replace(plain, evidence={**evidence, **({"rests_on": rests_on} if rests_on else {})})
    if own.status == CheckStatus.PASS:
        lead, tail = LOOKED_RIGHT, _fill(BUT_EARNS_NOTHING, {**floor, "run": "run.distributed" if run.nproc > 1
                                                             else "run.single"})
    else:
        lead, tail = None, _fill(ALSO_LEARNED_NOTHING, floor)
    return dataclasses.replace(own, status=CheckStatus.FAIL, fraction=None, lead=lead, tail=tail,
                               evidence={**own.evidence, **evidence})


def _fill(template: dict[str, str], values: dict) -> dict[str, str]:
    """A text of this module with the grader's own numbers (accuracy, floor, process count): none is the student's."""
    return text(template["zh"].format(**values), template["en"].format(**values))
