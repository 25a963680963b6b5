"""The DDP checklist as checks over what the harness saw in each rank.

Each ``check_*`` function takes the runs (``graders.torchrun.TorchrunRun``) and
returns a ``Finding``: status, the message key in the assignment's data, the
numbers that fill it, and evidence. ``graders.ddp_speedup.grader`` turns findings into
bilingual ``CheckResult``s with points from ``assignment.json``.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from coursework.report import CheckStatus, text
from graders import desync
from graders.checks import inputs as model_inputs
from graders.checks import contrib, share, sync
from graders.checks.records import epochs_of, rank_epochs, step_rows
from graders.early_stop import steps_taken
from graders.checks.stacks import SPAWN_RERUN, helper_process, stuck_in, where
from graders.evidence import SOURCE_CROSS_CHECKED, SOURCE_INSIDE, SOURCE_OUTSIDE
from graders.evidence.files import CODE_SUFFIXES, LOG_SUFFIXES  # what a log is called, and code
from graders.evidence.model import learned_nothing, unscored
from graders.sandbox.result import KilledReason




_MISSING_MODULE = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_]{0,63})")  # the top-level name: not on this host
_PEER_FAILURE = re.compile(r"closed by peer|remote worker|Connection reset|communicator was aborted|Broken pipe",
                           re.IGNORECASE)


@dataclass
class Finding:
    status: CheckStatus
    key: str
    params: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    fraction: float | None = None  # of the points, for partial credit
    fallback: str | None = None  # message key to use where the assignment has no text for ``key``
    lead: dict[str, str] | None = None  # zh/en text of the grader's own put before the message (graders.ddp_speedup.floor)
    tail: dict[str, str] | None = None  # and after it


# Judging what a script did needs it to have trained: with no step and no batch every
# check below would pass vacuously (no overlap, equal digests, no prints). The student's
# code caused that, so each of them fails with 0 points and says why (only a host that
# cannot run the job skips a check).
NO_TRAINING = Finding(CheckStatus.FAIL, "no_training")
LEARNED_NOTHING = Finding(CheckStatus.FAIL, "model_untrained", fallback="no_training")
PARAMS_FROZEN = Finding(CheckStatus.FAIL, "params_frozen", fallback="no_training")
NOT_FINISHED = Finding(CheckStatus.FAIL, "not_finished")
NOT_DISTRIBUTED = Finding(CheckStatus.FAIL, "not_distributed")
NOT_OBSERVED = Finding(CheckStatus.SKIP, "not_observed")  # correct code can read data in ways we cannot see
STDERR_ALLOWANCE = 30  # lines of library warnings a rank may print to stderr without being noisy
LINE_BYTES = 200  # bytes that count as one line of output: a rank that writes one endless line is not quiet
HAND_REDUCED_MIN = 0.9  # median fraction of gradient elements all-reduced by hand per step


def process_group(run) -> bool:
    """Did every rank of ``run`` form (or join) a process group of more than one process?"""
    if run is None or not run.ranks:
        return False
    for r in range(run.nproc):
        s = run.ranks.get(r)
        if s is None:
            return False
        fin = s.first("finished") or {}
        worlds = [rec.get("world") for rec in s.of("process_group")] + [fin.get("process_group")]
        if not any(isinstance(w, int) and w > 1 for w in worlds):
            return False
    return True


_UNJUDGED: Any = object()  # sync_kind's verdict not handed in: judge the contributions here


def sync_kind(run, verdict: dict[str, Any] | None = _UNJUDGED) -> str | None:
    """How gradients were synchronised: "ddp", "fsdp", "hand" (a collective of the script's own averaged the ranks'
    gradients or parameters), or None: also where the ranks' contributions were thrown away (``contrib``).
    ``verdict``: ``contrib.judge(run)`` where the caller has it already."""
    if run is None or not run.ranks:
        return None
    if verdict is _UNJUDGED:
        verdict = contrib.judge(run)
    if contrib.discarded(verdict):
        return None  # rank 0's weights broadcast over everyone's is no synchronisation, whatever collective did it
    if any(s.first("ddp") for s in run.ranks.values()) and sync.ddp_drives(run, step_rows):
        return "ddp"  # a DDP counts only where it wraps the stepped parameters and its hook fired
    if any(any(str(rec.get("type", "")).startswith("fsdp") or (rec.get("type") == "norms" and rec.get("sharded") is True)
               for rec in s.records) for s in run.ranks.values()):
        return "fsdp"
    fractions = []
    for r in range(run.nproc):
        rows = step_rows(run.ranks[r]) if r in run.ranks else []
        if not rows:
            return None
        fractions.append(statistics.median(row["hand_reduced"] for row in rows))
    if fractions and min(fractions) >= HAND_REDUCED_MIN:
        return "hand"
    return "hand" if contrib.synced_by_hand(verdict) else None


def unused_rank(verdict: dict[str, Any] | None, kind: str | None) -> dict[str, Any] | None:
    """The rank whose work never reached the update, as the contribution judge's ``verdict`` (``contrib.judge``)
    names it: ``{"why": "rank_idle", "rank"}`` (its own gradient was zero: ``loss * 0``; not judged under FSDP,
    whose local gradients are shards) or ``{"why": "discarded", "rank", "step", "steps", "of"}`` (its gradients or
    weights were thrown away at too many steps); None where every rank's work counted. ``ddp.grad_sync`` fails on
    it and ``sampler.coverage`` counts only the other ranks' data."""
    if not verdict:
        return None
    if verdict["idle"] is not None and kind != "fsdp":
        return {"why": "rank_idle", "rank": verdict["idle"]}
    if contrib.discarded(verdict):
        return {"why": "discarded", "rank": verdict["lost_rank"], "step": verdict["discarded"][0],
                "steps": verdict["discarded_count"], "of": verdict["steps"]}
    return None


def distributed_gate(run) -> Finding | None:
    """The finding every distributed check returns before judging, or None to judge."""
    if not trained(run):
        return untrained(run)
    if not process_group(run):
        return NOT_DISTRIBUTED
    return None


def rank_trained(stream) -> bool:
    """Did this rank take an optimizer step or consume a batch from a DataLoader?"""
    if any(rec.get("t") for rec in stream.of("steps")) or any(e.get("batches") for e in stream.of("epoch")):
        return True
    fin = stream.first("finished")
    return bool(fin and fin.get("steps"))


def trained(run) -> bool:
    """Was training observed in ``run`` (a step or a consumed batch on some rank), and did the
    model the grader evaluated learn something (``graders.evidence.model``)?"""
    return (run is not None and any(rank_trained(s) for s in run.ranks.values()) and not learned_nothing(run)
            and not sync.params_frozen(run))


def untrained(run) -> Finding:
    """The finding of a check that needs training: the grader's model evaluation, or no step at all."""
    if run is not None and learned_nothing(run):
        return LEARNED_NOTHING
    return PARAMS_FROZEN if sync.params_frozen(run) else NO_TRAINING


def model_params(run) -> dict[str, Any]:
    """Message numbers for a model the grader scored at chance."""
    m = run.evidence.get("model") or {}
    return {"acc": f"{100 * float(m.get('accuracy') or 0):.0f}%", "floor": f"{100 * float(m.get('min_accuracy') or 0):.0f}%",
            "steps": max((int((s.first("finished") or {}).get("steps") or 0) for s in run.ranks.values()), default=0)}


def own_exit(run) -> tuple[str, int] | None:
    """(rank, exit code) of a rank that ended non-zero by itself after its end marker, else None.

    The end marker is sent from ``atexit``, so ``sys.exit(1)`` and ``raise SystemExit(1)``
    still send it: the exit status comes from torchrun's failure summary. A finished rank
    killed by a signal is tolerated: gloo's teardown abort (SIGABRT) in torch 2.13, and
    torchrun's SIGTERM to the other ranks once one of them aborted.
    """
    codes = run.exit_codes
    positive = sorted((r, c) for r, c in codes.items() if c > 0)
    if positive:
        return str(positive[0][0]), positive[0][1]
    rc = run.result.returncode
    if rc and not codes and not run.result.killed_reason:  # failed, and no summary to say who
        return "?", rc
    return None


def check_run(run, model_evidence: bool = True) -> Finding:
    """Did every rank train and reach the end with exit status 0?

    Judged from per-rank markers (finished / raised) plus the exit codes in torchrun's
    failure summary; torchrun's own exit code alone cannot tell a student's ``sys.exit(1)``
    from the teardown abort that must not fail a correct script. ``model_evidence=False``
    (homework 3, whose ``train.progress`` names why a model did not change) leaves the
    grader's model evaluation and the frozen-parameter test out of this check.
    """
    ev = {"returncode": run.result.returncode, "timed_out": run.result.timed_out,
          "wall_s": round(run.result.wall_s, 2), "tampering": run.tampering, "exit_codes": run.exit_codes}
    ev["outside"] = {k: v for k, v in (run.evidence or {}).items() if not k.startswith("_")}  # graders.evidence
    if run.tampering:
        return Finding(CheckStatus.FAIL, "tampering", {"what": "; ".join(run.tampering)}, ev)
    if run.all_finished:
        bad = own_exit(run)
        if bad:
            rank, code = bad
            return Finding(CheckStatus.FAIL, "exit_code", {"rank": rank, "code": code, "ranks": rank, "rc": code,
                           "reason": text("脚本以非零状态退出", "non-zero exit status of the script")},
                           ev, fallback="died")
        if model_evidence and learned_nothing(run):  # records may claim steps; the grader's own evaluation says otherwise
            ev["model"] = run.evidence.get("model")
            return Finding(CheckStatus.FAIL, "model_untrained", {"n": run.nproc, **model_params(run)}, ev,
                           fallback="no_training")
        if model_evidence and sync.params_frozen(run):  # stepped, but nothing ever moved: the records say so themselves
            return Finding(CheckStatus.FAIL, "params_frozen", {"n": run.nproc, **model_params(run)}, ev,
                           fallback="no_training")
        if not (trained(run) if model_evidence else any(rank_trained(st) for st in run.ranks.values())):
            return Finding(CheckStatus.FAIL, "no_training", {"n": run.nproc, "ranks": "all", "rc": 0,
                           "reason": text("没有观察到任何训练步", "no training step was observed")},
                           ev, fallback="died")
        if run.nproc > 1 and not process_group(run):
            return Finding(CheckStatus.FAIL, "no_process_group", {"n": run.nproc}, ev)
        why = unscored(run) if model_evidence else None
        if why:  # the grading is held for review (graders.ddp_speedup.grader): say why here too
            ev["model"] = run.evidence.get("model")
            return Finding(CheckStatus.PASS, "ok_unscored", {"n": run.nproc, "why": why}, ev, fallback="ok")
        return Finding(CheckStatus.PASS, "ok", {"n": run.nproc}, ev)
    raised = [(r, run.ranks[r].exception) for r in range(run.nproc) if r in run.ranks and run.ranks[r].exception]
    raised.sort(key=lambda item: bool(_PEER_FAILURE.search(item[1]["message"])))  # the root cause first
    for r, exc in raised:
        if exc:
            ev["exception"] = exc
            log = run.scan_logs.get(f"rank{r}", "") or run.logs.get(f"rank{r}", "")
            spawn = "DataLoader worker" in exc["message"] and SPAWN_RERUN in log + "".join(run.stacks.values())
            absent = _MISSING_MODULE.match(exc["message"]) if exc["exc_type"] == "ModuleNotFoundError" else None
            key = "raised_spawn" if spawn else "raised_import" if absent else "raised"
            return Finding(CheckStatus.FAIL, key, {"rank": r, "exc": exc["exc_type"], "msg": _desync_or(exc["message"]),
                           "line": exc.get("line"), "code": exc.get("code", ""),
                           "module": absent.group(1) if absent else ""}, ev, fallback="raised")
    if run.result.timed_out:
        stuck = {name: stuck_in(txt) for name, txt in run.stacks.items() if not helper_process(txt)}
        ev["stuck"] = {name: what["en"] if what else None for name, what in stuck.items()}
        where_ = where(stuck)
        child = any("child" in name and SPAWN_RERUN in run.stacks[name] for name in stuck)
        return Finding(CheckStatus.FAIL, "hang_spawn" if child else "hang",
                       {"wall": round(run.result.wall_s), "where": where_}, ev)
    missing = [r for r in range(run.nproc) if r not in run.ranks or not run.ranks[r].finished]
    return Finding(CheckStatus.FAIL, "died", {"ranks": ", ".join(map(str, missing)),
                   "rc": run.result.returncode, "reason": _killed(run.result.killed_reason)}, ev)


def _killed(reason: object) -> dict[str, str]:
    """Why the sandbox ended the run, in both languages ("exit": it ended by itself). A stored
    report holds the reason as its string; one this code does not know is shown as it is."""
    if not reason:
        return text("自行退出", "exit")
    try:
        return KilledReason(str(reason)).label
    except ValueError:
        return text(str(reason), str(reason))


def _desync_or(message: str) -> dict[str, str] | str:
    """A DETAIL collective mismatch as "rank 1 called all_reduce ... while rank 0 called broadcast"
    (zh and en); any other message as the rank wrote it."""
    explained = desync.explain(message)
    return text(explained["zh"], explained["en"]) if explained else message[:300]


def _data_gate(run, eps) -> Finding | None:
    """No epoch record on any rank of a run that trained: data read without a DataLoader."""
    if not any(eps.values()):
        return NOT_OBSERVED
    if len(eps) < run.nproc or not all(eps.values()):
        return Finding(CheckStatus.SKIP, "no_data")
    return None


def _at_model(loader: Finding, seen: Finding | None) -> Finding:
    """The DataLoader's verdict checked against what reached the model (``graders.checks.inputs``).

    Where both fail the loader's failure stands (its message names the sampler); where the loader
    failed but the marks pass, the marks decide (the loader's verdict is kept as evidence); where it
    could not see the data, the model's inputs decide; where it passed, a failure at the model is a
    contradiction: the indices the sampler handed out are not the samples that were trained on."""
    if seen is None:
        return loader
    if loader.status == CheckStatus.FAIL:
        if seen.status != CheckStatus.PASS:
            return loader
        # The marks passed: the loader's indices are the script's word, numbered in whatever data set it
        # wraps (a shard of its own per rank reads 0..n/N on every rank); what reached the model decides.
        said = {"key": loader.key, **loader.evidence}
        return dataclasses.replace(seen, evidence={**seen.evidence, "dataloader": said})
    if loader.status == CheckStatus.PASS:
        if seen.status != CheckStatus.FAIL:
            return loader
        return dataclasses.replace(seen, key=seen.key + "_contradiction", fallback=seen.key,
                                   evidence={**seen.evidence, "dataloader": loader.evidence})
    return seen


def _sampler_check(run, loader, at_model) -> Finding:
    """A sampler check: the DataLoader's verdict, checked against the marks read at the model's input."""
    return distributed_gate(run) or _loader_at_model(run, loader, at_model)


def _loader_at_model(run, loader, at_model) -> Finding:
    """``loader``'s verdict on the run, checked against ``at_model``'s on the marks read at the model's input.
    Where the data carries marks and a rank's could not be read, the DataLoader's word does not stand alone:
    its failure stands, anything else earns nothing and says which rank hid its inputs."""
    inputs = model_inputs.read(run)
    found = loader(run)
    if inputs is None:
        gap = model_inputs.shortfall(run)
        if gap and found.status != CheckStatus.FAIL:
            return Finding(CheckStatus.SKIP, "unread_at_model", gap,
                           {**gap, "at_model": True, "dataloader": {"key": found.key, **found.evidence}},
                           fallback="not_observed")
    return _at_model(found, at_model(inputs) if inputs else None)


def _loader_disjoint(run) -> Finding:
    eps = rank_epochs(run)
    gate = _data_gate(run, eps)
    if gate:
        return gate
    if any(e[0]["kind"] == "iterable" for e in eps.values()):
        return Finding(CheckStatus.SKIP, "iterable")
    allowed = run.nproc - 1  # DistributedSampler pads with up to N-1 repeated indices
    n_epochs = min(len(e) for e in eps.values())
    for k in range(n_epochs):
        for a in range(run.nproc):
            for b in range(a + 1, run.nproc):
                sa, sb = set(eps[a][k]["indices"]), set(eps[b][k]["indices"])
                shared = len(sa & sb)
                if shared > allowed:
                    sampler = eps[a][k]["sampler"]
                    key = "overlap_no_sampler" if sampler != "DistributedSampler" else "overlap_sampler"
                    da, db = eps[a][k].get("view_digest"), eps[b][k].get("view_digest")
                    if key == "overlap_sampler" and da and db and da != db:
                        key = "overlap_views_differ"  # each rank split its data set differently (an unseeded random_split)
                    return Finding(CheckStatus.FAIL, key, {
                        "a": a, "b": b, "shared": shared, "of": min(len(sa), len(sb)), "epoch": k,
                        "sampler": sampler}, {"epoch": k, "shared": shared, "sampler": sampler})
    return Finding(CheckStatus.PASS, "ok", {"epochs": n_epochs}, {"epochs_checked": n_epochs})


def _model_disjoint(inputs) -> Finding:
    worst = model_inputs.overlap(inputs)
    steps = min(len(s) for s in inputs.steps.values())
    if worst:
        return Finding(CheckStatus.FAIL, "overlap_at_model", worst, {**worst, "at_model": True}, fallback="overlap_no_sampler")
    walked = model_inputs.epoch_overlap(inputs) or model_inputs.whole_walks(inputs)
    if walked:
        return Finding(CheckStatus.FAIL, "overlap_epoch_at_model", {**walked, "pass": walked["epoch"] + 1},
                       {**walked, "at_model": True}, fallback="overlap_at_model")
    return Finding(CheckStatus.PASS, "ok_at_model", {"steps": steps}, {"steps_checked": steps, "at_model": True},
                   fallback="ok")


def check_disjoint(run) -> Finding:
    """Disjoint data per rank, and each rank's model trained on its own 1/N of every step (``share``): a
    split that only the DataLoader made, with the work done by one rank or by every rank, is no split."""
    finding = _sampler_check(run, _loader_disjoint, _model_disjoint)
    if finding.status == CheckStatus.FAIL or distributed_gate(run):
        return finding
    lopsided = share.uneven(run)
    if lopsided is None:
        return finding
    return Finding(CheckStatus.FAIL, "uneven_share", {k: lopsided[k] for k in ("rank", "trained", "share", "steps")},
                   {**lopsided, "at_model": True, "dataloader": finding.evidence}, fallback="overlap_no_sampler")


def _loader_coverage(run, ranks: list[int] | None = None) -> Finding:
    """Every epoch's indices of all ranks (``ranks``: of those only) against the data set's length."""
    eps = rank_epochs(run)
    gate = _data_gate(run, eps)
    if gate:
        return gate
    if any(e[0]["kind"] == "iterable" for e in eps.values()):
        return Finding(CheckStatus.SKIP, "iterable")
    # A view (a random_split half, a Subset) is numbered in its base data set, but its sampler covers only the
    # view: count it against the view's length, not the base's (a train and a test half each have their own).
    base = eps[0][0]["dataset_len"] or 0
    size = min(eps[0][0].get("local_len") or base, base)
    bs = max(e[0]["batch_size"] for e in eps.values())
    drop = any(e[0]["drop_last"] for e in eps.values())
    allowed = run.nproc * (bs - 1) + run.nproc - 1 if drop else run.nproc - 1
    n_epochs = min(len(e) for e in eps.values())
    for k in range(n_epochs):
        union = set().union(*(set(eps[r][k]["indices"]) for r in (eps if ranks is None else ranks)))
        missing = size - sum(1 for i in union if 0 <= i < base)  # never set(range(size)): __len__ is the student's
        if missing > allowed:
            return Finding(CheckStatus.FAIL, "missing", {
                "missing": missing, "size": size, "epoch": k, "seen": len(union)},
                {"epoch": k, "missing": missing, "dataset_len": size, "allowed": allowed})
    return Finding(CheckStatus.PASS, "ok", {"size": size, "epochs": n_epochs}, {"allowed_missing": allowed})


def _model_coverage(inputs, asked: int | None = None, ranks: list[int] | None = None) -> Finding:
    """Coverage at the model: how much of the training files ever reached it (``asked``: the epochs the
    grader asked for, which set what random draws must reach), then the first pass of each rank. ``ranks``:
    count only what these ranks fed the model, against everything the run trained on."""
    everything = inputs.trained()
    if ranks is not None:
        if asked is None:  # random draws are judged against every rank's draws, not only the counted ranks'
            asked = sum(len(inputs.sequence(r)) for r in inputs.steps) / inputs.train_size
        inputs = model_inputs.Inputs({r: inputs.steps[r] for r in ranks}, inputs.train_size)
    small = model_inputs.subset(inputs, asked)
    if small:
        return Finding(CheckStatus.FAIL, "subset_at_model", small, {**small, "at_model": True}, fallback="missing")
    epochs = model_inputs.passes(inputs)
    seen = len(inputs.trained())
    if epochs is None:  # random draws: no first pass to judge; the share they reached was (``subset``)
        reached = {"seen": seen, "size": inputs.train_size, "share": f"{100 * seen / inputs.train_size:.0f}%"}
        return Finding(CheckStatus.PASS, "ok_draws_at_model", reached, {**reached, "at_model": True, "random_draws": True},
                       fallback="ok")
    lost = model_inputs.missing(inputs, epochs, of=everything)
    if lost:
        return Finding(CheckStatus.FAIL, "missing_at_model", lost, {**lost, "at_model": True}, fallback="missing")
    return Finding(CheckStatus.PASS, "ok_at_model", {"size": seen}, {"at_model": True}, fallback="ok")


def _asked(run, epochs: int | None) -> int | None:
    """The epochs a run was asked for, where they set what it must reach (not a run the grader stopped)."""
    return None if run is None or run.stopped else epochs


def check_coverage(run, epochs: int | None = None) -> Finding:
    """Every sample reached the model, counting only the data of ranks whose work reached the update: a rank that
    fed the model its share but backpropagated ``loss * 0``, or whose gradients or weights were thrown away,
    covered nothing (the contribution judge's verdict, ``unused_rank``)."""
    asked = _asked(run, epochs)
    finding = _sampler_check(run, _loader_coverage, functools.partial(_model_coverage, asked=asked))
    if finding.status != CheckStatus.PASS:
        return finding
    verdict = contrib.judge(run)
    unused = unused_rank(verdict, sync_kind(run, verdict))
    if unused is None or _replicas_apart(run):  # each rank kept its own model: unsynchronised, not thrown away
        return finding
    rank = unused["rank"]
    ev = {"contribution": verdict, "all_ranks": {"key": finding.key, **finding.evidence}}
    if rank not in range(run.nproc):  # no rank named (no reading says whose work was lost): nothing to recount
        return Finding(CheckStatus.FAIL, unused["why"], {**unused, "rank": "?"}, ev, fallback="missing")
    kept = [r for r in range(run.nproc) if r != rank]
    recount = _loader_at_model(run, functools.partial(_loader_coverage, ranks=kept),
                               functools.partial(_model_coverage, asked=asked, ranks=kept))
    ev["counted_ranks"] = kept
    if recount.status == CheckStatus.PASS:  # the other ranks fed the model every sample on their own
        return dataclasses.replace(recount, evidence={**recount.evidence, **ev})
    p = recount.params
    counted = {k: p[k] for k in ("seen", "size", "epoch") if k in p}
    if "missing" in p or ("seen" in p and "size" in p):
        counted["missing"] = p.get("missing", p.get("size", 0) - p.get("seen", 0))
    return Finding(CheckStatus.FAIL, unused["why"], {**unused, **counted},
                   {**recount.evidence, **ev, "counted_key": recount.key}, fallback="missing")


def _replicas_apart(run) -> bool:
    """Did the ranks' models differ while training (the per-step comparison; the end only where there is none)?
    Then no rank's work was copied over or zeroed in a shared model: each rank trained a replica of its own on its
    own data (a model never wrapped in DDP), which grad_sync fails, and the data each rank fed still reached a
    model. Not the end alone where steps were compared: one parameter nudged after training would pass for it."""
    during = sync.compare_params(run)
    if during is not None and not during["sharded"]:
        return bool(during["differ"])
    fins = [run.ranks[r].first("finished") for r in range(run.nproc) if r in run.ranks]
    return len({f.get("digest") for f in fins if f}) > 1


def check_coverage_alone(run1, nproc: int, epochs: int | None = None) -> Finding | None:
    """The 1-process run's coverage, judged only to fail: a split that is right for N processes by
    luck (``num_replicas=2`` written in by hand) leaves the lone process half the data. None where it
    covered the data, did not finish, was stopped early or could not be observed: the N-process
    verdict stands."""
    if run1 is None or run1.stopped or not run1.all_finished or not trained(run1):
        return None
    at_model = functools.partial(_model_coverage, asked=_asked(run1, epochs))
    finding = _loader_at_model(run1, _loader_coverage, at_model)  # no distributed gate: one process
    if finding.status != CheckStatus.FAIL:
        return None
    return Finding(CheckStatus.FAIL, "missing_one_process", {**finding.params, "n": nproc},
                   {**finding.evidence, "one_process": True}, fallback="missing")


def _loader_reshuffle(run) -> Finding:
    eps = rank_epochs(run)
    if not any(eps.values()):
        return NOT_OBSERVED
    if any(e and e[0]["kind"] == "iterable" for e in eps.values()):
        return Finding(CheckStatus.SKIP, "iterable")
    for r, es in sorted(eps.items()):
        if len(es) < 2:
            return Finding(CheckStatus.SKIP, "one_epoch")
        if all(es[i]["indices"] == es[0]["indices"] for i in range(1, len(es))):
            return Finding(CheckStatus.FAIL, "same_order", {"rank": r, "epochs": len(es),
                           "sampler": es[0]["sampler"]}, {"rank": r, "epochs": len(es)})
    return Finding(CheckStatus.PASS, "ok", {"epochs": min(len(e) for e in eps.values())})


def _model_reshuffle(inputs) -> Finding:
    epochs = model_inputs.passes(inputs)
    if epochs is None:  # random draws: no epochs, but a batch drawn again from the same seed comes back whole
        again = model_inputs.repeated_batches(inputs)
        if again:
            return Finding(CheckStatus.FAIL, "same_draws_at_model", again, {**again, "at_model": True,
                           "random_draws": True}, fallback="same_order")
        return Finding(CheckStatus.PASS, "ok_draws_at_model", {}, {"at_model": True, "random_draws": True}, fallback="ok")
    if any(len(runs) < 2 for runs in epochs.values()):
        return Finding(CheckStatus.SKIP, "one_epoch", {}, {"at_model": True})
    same = model_inputs.same_order(epochs)
    if same:
        return Finding(CheckStatus.FAIL, "same_order_at_model", same, {**same, "at_model": True}, fallback="same_order")
    return Finding(CheckStatus.PASS, "ok_at_model", {}, {"at_model": True}, fallback="ok")


def check_reshuffle(run) -> Finding:
    return _sampler_check(run, _loader_reshuffle, _model_reshuffle)


def check_grad_sync(run) -> Finding:
    fins = {r: run.ranks[r].first("finished") for r in range(run.nproc) if r in run.ranks}
    if not trained(run):
        return untrained(run)
    if len(fins) < run.nproc or not all(fins.values()):
        return NOT_FINISHED
    if not any(f.get("steps") for f in fins.values()):  # untouched parameters are trivially equal
        return NO_TRAINING
    ref = fins[0]
    steps = {r: f["steps"] for r, f in fins.items()}
    verdict = contrib.judge(run)
    kind = sync_kind(run, verdict) if process_group(run) else None
    ev = {"digests": {r: f["digest"][:16] for r, f in fins.items()}, "steps": steps,
          "model_source": ref["model_source"], "process_group": process_group(run), "sync": kind,
          "source": SOURCE_INSIDE}
    unseen = sync.model_unseen(run)
    if unseen:  # the synthetic images never reached a module that then ran backward: nothing to judge but a list
        return Finding(CheckStatus.SKIP, "model_not_seen", {}, {**ev, "sources": unseen})
    during = sync.compare_params(run)
    if during is not None and not during["sharded"]:
        ev.update(compared_steps=during["compared"][:16], steps_compared=len(during["compared"]),
                  every_step=during.get("every_step"), source=SOURCE_CROSS_CHECKED)
        bad = during["differ"]
        if bad:  # the parameters the optimizers step, compared while training: a late broadcast cannot hide it
            ev["differ_at_step"] = bad["step"]
            key = "differ_during" if kind else "no_ddp_during"
            diff = f"{bad['diff']:.2e}" if bad["diff"] == bad["diff"] else "?"  # nan: no full record differs after it
            return Finding(CheckStatus.FAIL, key, {"rank": bad["rank"], "diff": diff,
                           "step": bad["step"]}, ev, fallback="differ" if kind else "no_ddp")
    if verdict:
        ev["contribution"] = verdict
    unused = unused_rank(verdict, kind)
    if unused and unused["why"] == "rank_idle":  # the rank's data never moved the weights
        return Finding(CheckStatus.FAIL, "rank_idle", {"rank": unused["rank"]}, ev, fallback="differ")
    if unused:  # the ranks agree, but only because one rank's work was copied over the others'
        rank = "?" if unused["rank"] is None else unused["rank"]
        return Finding(CheckStatus.FAIL, "discarded", {**unused, "rank": rank}, ev, fallback="no_ddp")
    reading = sync.loopback_reading(run, max(steps.values(), default=0)) if kind else None
    if reading:
        ev["traffic_of_ring"] = reading["of_ring"]  # what the margin below is measured against
    short = sync.loopback_shortfall(run, max(steps.values(), default=0)) if kind else None
    if short:  # "synchronised", yet the ranks hardly exchanged a byte: the host's counters decide
        ev["loopback"] = {**short, "source": SOURCE_OUTSIDE}
        return Finding(CheckStatus.FAIL, "no_traffic", {"moved": short["moved"], "least": short["least"]}, ev,
                       fallback="differ")
    for r, f in fins.items():
        if f["digest"] != ref["digest"]:
            diff = max((abs(x - y) / max(abs(x), abs(y), 1e-12)
                        for x, y in zip(f["param_sums"], ref["param_sums"])), default=0.0)
            ev["max_rel_diff"] = diff
            if kind is None:
                key = "no_ddp"
            elif len(set(steps.values())) > 1:
                key = "steps_differ"
            else:
                key = "differ"
            return Finding(CheckStatus.FAIL, key, {"rank": r, "diff": f"{diff:.2e}",
                           "steps": ", ".join(f"rank {k}: {v}" for k, v in steps.items())}, ev)
    if kind is None:  # equal, but nothing made them equal but the seed and the data
        return Finding(CheckStatus.FAIL, "no_sync_seen", {"n": run.nproc}, ev)
    return Finding(CheckStatus.PASS, "ok" if kind != "hand" else "ok_hand", {"n": run.nproc}, ev, fallback="ok")


def check_rank0_io(run, epochs: int, extra_prints: int) -> Finding:
    gate = distributed_gate(run)
    if gate:
        return gate
    saves = {r: len(run.ranks[r].of("save")) for r in run.ranks if r > 0}
    printed = {r: sum(p["count"] for p in run.ranks[r].of("prints")) for r in run.ranks if r > 0}
    logged = {r: sum(p.get("logging", 0) for p in run.ranks[r].of("prints")) for r in run.ranks if r > 0}
    training = {r: _prints_while_training(run.ranks[r]) for r in run.ranks if r > 0}
    prints = {r: printed[r] + logged[r] for r in printed}  # logging.info every step is the same noise
    outside = sync.rank_output(run)  # what the launcher captured and the files left: no patched function involved
    ev = {"saves": saves, "prints": printed, "logging": logged, "source": SOURCE_CROSS_CHECKED,
          "outside": {r: {**{k: v for k, v in o.items() if k.endswith(("_lines", "_redraws", "_bytes", "_recurring", "_reached"))},
                          "files": o["files"][:5], "other_files": o["other_files"][:5], "elsewhere": o["elsewhere"][:5]}
                      for r, o in outside.items()}}
    redraws, by_bytes, by_lines, erased = {}, {}, {}, {}
    for r, o in outside.items():
        if o["files"] or o["elsewhere"]:
            saves[r] = max(saves.get(r, 0), len(o["files"]) + len(o["elsewhere"]))
        for kind in ("stdout", "stderr"):  # the rank cut its own captured output after writing it
            if o[f"{kind}_reached"] > o[f"{kind}_bytes"]:
                erased[r] = erased.get(r, 0) + o[f"{kind}_reached"] - o[f"{kind}_bytes"]
                o[f"{kind}_bytes"] = o[f"{kind}_reached"]
        # a progress bar's redraws are output too (\r, not \n), and so is one endless line: bytes bound both
        redraws[r] = o["stdout_redraws"] + o["stderr_redraws"]
        by_bytes[r] = (o["stdout_bytes"] + max(0, o["stderr_bytes"] - STDERR_ALLOWANCE * LINE_BYTES)) // LINE_BYTES
        by_lines[r] = o["stdout_lines"] + max(0, o["stderr_lines"] - STDERR_ALLOWANCE) + redraws[r]
        captured = max(by_lines[r], by_bytes[r])
        if captured > prints.get(r, 0):
            prints[r] = captured
            printed[r] = max(printed.get(r, 0), captured - logged.get(r, 0))
    bad_saves = {r: n for r, n in saves.items() if n}
    noisy = {r: n for r, n in prints.items() if n > epochs + extra_prints}
    if bad_saves:
        r, n = next(iter(bad_saves.items()))
        key = "saves_and_prints" if noisy else "saves"
        if outside.get(r, {}).get("files") and not len(run.ranks[r].of("save")):  # only the files show it
            key = "files_and_prints" if noisy else "files"
        elif outside.get(r, {}).get("elsewhere") and not len(run.ranks[r].of("save")):  # written where the run's end took it
            return Finding(CheckStatus.FAIL, "files_elsewhere", {"rank": r, "saves": n,
                           "paths": ", ".join(outside[r]["elsewhere"][:3])}, ev, fallback="saves")
        return Finding(CheckStatus.FAIL, key, {"rank": r, "saves": n, "prints": noisy.get(r, 0),
                       "paths": ", ".join(outside.get(r, {}).get("files", [])[:3])}, ev, fallback="saves")
    unlisted = sync.unlisted_folders(run)
    if unlisted:  # what the grader could not list may hold a rank's checkpoint: not seen counts against the run
        return Finding(CheckStatus.WARN, "files_unlisted", {"n": len(unlisted), "paths": ", ".join(unlisted[:3])},
                       {**ev, "unlisted": unlisted[:10]}, fallback="files")
    unclaimed = sync.unclaimed_checkpoints(run)
    if unclaimed:  # a saved model no rank reported writing: who wrote it is unknown, which counts against the run
        return Finding(CheckStatus.WARN, "files_unclaimed", {"n": len(unclaimed), "paths": ", ".join(unclaimed[:3])},
                       {**ev, "unclaimed": unclaimed[:10]}, fallback="files")
    # A line a rank prints while it trains (once per epoch, say) is output repeated once per process,
    # however few epochs the run had; a line before its first step or after its last is not.
    # The launcher's capture says the same whichever function wrote it (sys.stdout.write, os.write) to whichever
    # descriptor: lines of one shape that comes back ("epoch 0: ...", "epoch 1: ...") recur, a banner and a last
    # line do not (on stderr, a library's warning raised again repeats its text and is not counted).
    recurring = {r: max(n, (outside.get(r) or {}).get("stdout_recurring", 0),
                        (outside.get(r) or {}).get("stderr_recurring", 0)) for r, n in training.items()}
    recurring = {r: n for r, n in recurring.items() if n}
    if noisy or recurring:
        r = next(iter(noisy or recurring))
        key = "prints" if noisy else ("prints_training" if training.get(r) else "prints_recurring")
        if noisy and redraws.get(r, 0) > epochs + extra_prints:
            key = "prints_redraws"  # a progress bar on this rank: counted by its redraws
        elif noisy and by_bytes.get(r, 0) > max(by_lines.get(r, 0), epochs + extra_prints):
            key = "prints_bytes"  # few line ends, many bytes
        return Finding(CheckStatus.WARN, key,
                       {"rank": r, "prints": prints[r], "print_calls": printed[r], "logging_calls": logged[r],
                        "training": training.get(r, 0), "redraws": redraws.get(r, 0), "recurring": recurring.get(r, 0),
                        "bytes": (outside.get(r) or {}).get("stdout_bytes", 0) + (outside.get(r) or {}).get("stderr_bytes", 0)},
                       {**ev, "training": training}, fallback="prints")
    if erased:  # what a rank erased cannot be read: it counts against the run, never for it
        r, n = next(iter(erased.items()))
        return Finding(CheckStatus.WARN, "output_erased", {"rank": r, "bytes": n}, {**ev, "erased": erased, "training": training},
                       fallback="prints")
    others = {r: logs for r, o in outside.items()
              if (logs := [f for f in o["other_files"] if _log_like(f) or ((f in o["texts"] or f in o["written"]) and not _code(f))])}
    # A log or metrics file a rank other than 0 left (every rank appending to metrics.csv) is output too, and so is
    # any file such a rank opened for writing and left, whatever its name or format (raw float32 losses appended
    # with tofile): only code, a build product or a compiler's cache (not listed) is nobody's output.
    if others:
        r, files = next(iter(others.items()))
        return Finding(CheckStatus.WARN, "files_other", {"rank": r, "n": len(files), "paths": ", ".join(files[:3])},
                       {**ev, "training": training}, fallback="prints")
    return Finding(CheckStatus.PASS, "ok", {}, {**ev, "training": training})


def _log_like(name: str) -> bool:
    """A file a rank left that reads as a log or metrics (by name): a cache or a compiled module does not."""
    low = name.lower()
    return "__pycache__" not in low and (low.endswith(LOG_SUFFIXES) or "tfevents" in low)


def _code(name: str) -> bool:
    """Source or a build product a library generates (a compiler's kernel, a lock): text, but not output."""
    return name.lower().endswith(CODE_SUFFIXES)


def _prints_while_training(stream) -> int:
    """How many of a rank's print()/log records came between its first and its last optimizer step
    (a start-up banner or a closing line does not count; the harness keeps the first 64 steps)."""
    last = steps_taken(stream.records)
    return sum(1 for p in stream.of("prints") for s in p.get("at_steps", []) if 0 < s < last)


def check_syncbn(run) -> Finding:
    gate = distributed_gate(run)
    if gate:
        return gate
    if sync_kind(run) is None:
        return Finding(CheckStatus.FAIL, "no_ddp")
    ddp = (run.ranks[0].first("norms") or run.ranks[0].first("ddp")) if 0 in run.ranks else None  # what the optimizer trains
    if ddp is None:
        return NOT_OBSERVED
    ev = {"batchnorm": ddp["batchnorm"], "syncbatchnorm": ddp["syncbatchnorm"]}
    lone = ddp.get("syncbn_lone") if isinstance(ddp.get("syncbn_lone"), int) else 0
    if lone > 0:  # counted in batchnorm: a SyncBatchNorm over a group short of every rank syncs with nobody else
        return Finding(CheckStatus.WARN, "lone_group", {"bn": ddp["batchnorm"], "lone": lone}, {**ev, "syncbn_lone": lone},
                       fallback="plain_bn")
    if ddp["batchnorm"] and not ddp["syncbatchnorm"]:
        return Finding(CheckStatus.WARN, "plain_bn", {"bn": ddp["batchnorm"]}, ev)
    if ddp["batchnorm"]:  # some layers converted, some still per rank: those normalise with their own slice
        return Finding(CheckStatus.WARN, "partly_synced", {"bn": ddp["batchnorm"], "sbn": ddp["syncbatchnorm"]}, ev,
                       fallback="plain_bn")
    synced, plain, lone = bn_calls(run)
    if plain or lone:  # what the layers did in training, not what they were at the wrap and the first step
        calls = {**ev, "bn_calls": {"synced": synced, "plain": plain, "lone": lone}}
        return Finding(CheckStatus.WARN, "per_rank_in_training", {"calls": plain + lone, "all": synced + plain + lone},
                       calls, fallback="plain_bn")
    return Finding(CheckStatus.PASS, "ok" if ddp["syncbatchnorm"] else "no_bn", {"sbn": ddp["syncbatchnorm"]}, ev)


def bn_calls(run) -> tuple[int, int, int]:
    """(synchronised over every rank, per rank, over a group short of every rank): BatchNorm forwards with
    gradients on after the first step, every rank's last count (the harness's ``bn_calls`` records, sent with the
    step records; their schema is ``graders.integrity``'s)."""
    total = [0, 0, 0]
    for stream in run.ranks.values():
        last = stream.of("bn_calls")
        for i, n in enumerate(last[-1]["counts"] if last else ()):
            total[i] += n
    return total[0], total[1], total[2]


def check_no_sync(run) -> Finding:
    gate = distributed_gate(run)
    if gate:
        return gate
    kind = sync_kind(run)
    if kind is None or 0 not in run.ranks:
        return Finding(CheckStatus.FAIL, "no_ddp")
    if kind == "hand":  # by-hand reduction happens where the script puts it: no bucket hook to count
        return Finding(CheckStatus.PASS, "no_accumulation", {}, {"sync": kind})
    rows = [r for r in step_rows(run.ranks[0]) if r["backwards"] > 1]
    if not rows:
        return Finding(CheckStatus.PASS, "no_accumulation")
    micro = statistics.median(r["backwards"] for r in rows)
    synced = statistics.median(r["synced"] for r in rows)
    ev = {"micro_batches_per_step": micro, "synced_per_step": synced}
    if synced > 1:
        return Finding(CheckStatus.WARN, "every_micro", {"synced": f"{synced:g}", "micro": f"{micro:g}"}, ev)
    return Finding(CheckStatus.PASS, "ok", {"micro": f"{micro:g}"}, ev)


def batch_info(run1, run_n) -> Finding:
    def first(run, kind):
        s = run.ranks.get(0) if run else None
        return s.first(kind) if s else None
    eps = epochs_of(run_n.ranks[0]) if run_n and 0 in run_n.ranks else []
    bs = eps[0]["batch_size"] if eps else None
    opt1, opt_n = first(run1, "optimizer"), first(run_n, "optimizer")
    lr1 = opt1["lr"][0] if opt1 else None
    lrn = opt_n["lr"][0] if opt_n else None
    n = run_n.nproc if run_n else 0
    params = {"bs": bs if bs is not None else "?", "n": n, "global": bs * n if bs else "?",
              "lr1": _number(lr1), "lrn": _number(lrn)}
    return Finding(CheckStatus.INFO, "info", params, {"per_rank_batch": bs, "nproc": n,
                   "global_batch": bs * n if bs else None, "lr_1": _number(lr1), "lr_n": _number(lrn)})


def _number(x: Any) -> str:
    """A student-supplied value (a learning rate) as short text: ``:g`` for real numbers only."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:g}"
    return "?" if x is None else str(x)[:40]
