"""The FSDP homework's checks over what the harness saw in each rank.

Records come from ``distgrade_harness.fsdp`` (``fsdp_model``, ``fsdp_optimizer``,
``fsdp_mem``, ``fsdp_save``, ``fsdp_dcp``, ``fsdp_state_dict``, ``fsdp_oom``,
``fsdp_end``) plus the generic ``steps``/``exception``/``finished`` records (the checkpoint's check is
``graders.fsdp_fit.checkpoint``). Each
``check_*`` returns a ``graders.checks.ddp.Finding`` (status, message key, numbers,
evidence); ``graders.fsdp_fit.grader`` turns them into bilingual results with points from
``assignment.json``. Byte numbers in messages are pre-formatted with ``fmt_bytes``.
"""
from __future__ import annotations

import re
import statistics
from typing import Any

from coursework.report import CheckStatus, text
from graders.checks import ddp
from graders.checks.ddp import Finding
from graders.evidence import cards
from graders.fsdp_fit.training import training_logic

_TRIED = re.compile(r"Tried to allocate ([\d.]+ [KMGT]?i?B)")


def fmt_bytes(n: float | None) -> str:
    """Bytes as students read them: ``1.50 GB`` / ``168 MB`` (decimal units, like the chapter)."""
    if n is None:
        return "?"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            digits = 2 if abs(n) < 10 * size else (1 if abs(n) < 100 * size else 0)
            return f"{n / size:.{digits}f} {unit}"
    return f"{n:.0f} B"


CONTRADICTION = 0.9  # a peak below this share of the states on the measured device at the same step


def model_record(run) -> dict | None:
    """Rank 0's description of the module that trained: the root its step records name (the one that took
    the DataLoader's batches and whose outputs a backward ran through), not the one called most often, the
    largest or the first one wrapped. None where no step names a described root: with several roots and
    no step, which one learned is unknown, and that counts against the run."""
    s = run.ranks.get(0) if run else None
    recs = [r for r in s.of("fsdp_model") if "error" not in r] if s else []
    named = [m.get("root") for m in s.of("fsdp_mem")] if s else []
    named = [i for i in named if isinstance(i, int) and not isinstance(i, bool)]
    if named:
        return next((r for r in recs if r.get("root") == named[-1]), None)
    return recs[0] if len(recs) == 1 else None


def replicated_beside(run, model: dict) -> dict | None:
    """A DDP replica of the model that trained, wherever the step records do not name it: a
    ``DistributedDataParallel`` the harness saw wrap at least half as many parameters as the model, or
    another root that trained (took batches, had a backward) and is DDP or whole on the rank. Whatever
    else was sharded, that model is not."""
    s = run.ranks.get(0) if run else None
    if s is None:
        return None
    size = max(count(model.get("global_params")), 1)
    for rec in s.of("ddp"):
        if count(rec.get("parameters")) >= 0.5 * size:
            return {"source": "ddp", "parameters": count(rec.get("parameters"))}
    mems = s.of("fsdp_mem")
    trained = mems[-1].get("trained") if mems else None
    roots = {r.get("root"): r for r in s.of("fsdp_model") if "error" not in r}
    for i in trained if isinstance(trained, list) else []:
        rec = roots.get(i) if isinstance(i, int) else None
        if rec is None or rec is model or count(rec.get("global_params")) < 0.5 * size:
            continue
        whole = count(rec.get("local_param_bytes")) >= 0.9 * count(rec.get("global_params")) * count(rec.get("element_size"))
        if rec.get("ddp") or (whole and not rec.get("fsdp2_units") and not rec.get("fsdp1_units")):
            return {"source": "root", "root": i, "parameters": count(rec.get("global_params")), "ddp": bool(rec.get("ddp"))}
    return None


def count(v) -> int:
    """A non-negative int from a record, else 0 (a bool, a negative number or anything else is not a count)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def contradiction(run) -> tuple[int, dict] | None:
    """The first rank and step whose peak is below the states live at that very step (parameters,
    gradients, optimizer states on the device the peak counts): memory the counter did not see,
    such as a model trained in a thread it was not entered in."""
    for r, s in sorted((run.ranks or {}).items()) if run else []:
        for m in s.of("fsdp_mem"):
            states = m.get("measured")
            if not isinstance(states, int) or isinstance(states, bool):
                states = m["params"] + m["grads"] + m["optimizer"]
            if m["peak"] < CONTRADICTION * states:
                return r, {**m, "states": states}
    return None


def blinded(run) -> tuple[int, dict] | None:
    """The first rank whose harness saw a forward or backward run with the CPU memory counter switched
    off (the script popped the dispatch modes), with the step and the module."""
    for r, s in sorted((run.ranks or {}).items()) if run else []:
        rec = s.first("fsdp_blind")
        if rec:
            step, where = rec.get("step"), rec.get("where")
            return r, {"step": count(step), "where": where[:80] if isinstance(where, str) else "?"}
    return None


def peaks(run) -> dict[int, dict]:
    """Per rank: the step with the highest peak, and the model states measured then."""
    out = {}
    for r, s in sorted((run.ranks or {}).items()) if run else []:
        mems = s.of("fsdp_mem")
        if mems:
            top = max(mems, key=lambda m: m["peak"])
            states = top["params"] + top["grads"] + top["optimizer"]
            out[r] = {**top, "other": max(0, top["peak"] - states), "steps": len(mems)}
    return out


def oom_of(run) -> tuple[int, dict] | None:
    """The first rank that ran out of card memory, with the harness's numbers."""
    for r, s in sorted(run.ranks.items()) if run else []:
        rec = s.first("fsdp_oom")
        if rec:
            return r, rec
    return None


def check_run(run, card: str | dict[str, str]) -> Finding:
    """The DDP grader's run check, with an out-of-memory error explained by its numbers."""
    found = oom_of(run)
    if found and not run.tampering:
        r, rec = found
        states = rec.get("states") or {}
        tried = _TRIED.search(rec.get("message", ""))
        ev = {"oom": rec, "returncode": run.result.returncode}
        return Finding(CheckStatus.FAIL, "oom", {
            "rank": r, "step": rec.get("step", 0), "card": card, "capacity": fmt_bytes(rec.get("capacity")),
            "allocated": fmt_bytes(rec.get("allocated")), "tried": tried.group(1) if tried else "?",
            "params": fmt_bytes(states.get("params")), "grads": fmt_bytes(states.get("grads")),
            "optimizer": fmt_bytes(states.get("optimizer"))}, ev)
    # whether the stepped model changed is train.progress's to say, with its cause (an optimizer made
    # before fully_shard steps parameters FSDP2 replaced): the run itself ran and stepped
    return ddp.check_run(run, model_evidence=False)


def wrapping(model: dict) -> dict[str, Any]:
    """Summarise the wrapping: API, units with parameters, largest unit share, strategy."""
    units = [u for u in model["fsdp2_units"] + model["fsdp1_units"] if u["params"] > 0]
    total = model["global_params"] or 1
    strategies = {u["strategy"] for u in model["fsdp1_units"] if u["params"] > 0}
    if model["fsdp2_units"]:  # the root never reshards after forward: judge the inner units
        inner = [u for u in model["fsdp2_units"] if u["name"] != "(root)" and u["params"] > 0]
        judged = inner or [u for u in model["fsdp2_units"] if u["params"] > 0]
        strategies |= {"FULL_SHARD" if u["reshard_after_forward"] else "SHARD_GRAD_OP" for u in judged}
    return {"api": "fully_shard" if model["fsdp2_units"] else ("FullyShardedDataParallel" if model["fsdp1_units"]
                                                                   else ("DDP" if model["ddp"] else "none")),
            "units": len(units), "largest_fraction": max((u["params"] / total for u in units), default=1.0),
            "strategies": sorted(strategies)}


def check_sharded(run, nproc: int, estimates: dict[int, dict]) -> Finding:
    """Are the parameters sharded (ZeRO-3), only gradients and states (ZeRO-2), or nothing?"""
    model = model_record(run)
    if model is None:
        return Finding(CheckStatus.FAIL, "no_model")  # the script built no model we could see: its fault
    w = wrapping(model)
    elsize = model["element_size"]
    global_b, local_b = model["global_params"] * elsize, model["local_param_bytes"]
    params = {"local": fmt_bytes(local_b), "global": fmt_bytes(global_b), "n": nproc,
              "api": w["api"], "strategy": "/".join(w["strategies"]) or "-",
              "extra": fmt_bytes(estimates[2]["total_bytes"] - estimates[3]["total_bytes"])}
    ev = {"wrapping": w, "local_param_bytes": local_b, "global_param_bytes": global_b}
    beside = replicated_beside(run, model)
    if beside and w["api"] not in ("DDP", "none"):  # a sharded module ran, but the model that learned is DDP
        params["replica"] = f"{beside['parameters']:,}"
        return Finding(CheckStatus.FAIL, "ddp_beside", params, {**ev, "replica": beside}, fallback="ddp")
    if w["api"] in ("DDP", "none") or "NO_SHARD" in w["strategies"]:
        key = "no_shard" if "NO_SHARD" in w["strategies"] else ("ddp" if w["api"] == "DDP" else "none")
        return Finding(CheckStatus.FAIL, key, params, ev)
    if local_b > 0.9 * global_b and nproc > 1:
        return Finding(CheckStatus.FAIL, "replicated", params, ev)
    # FSDP2 units list the parameters they own: what none owns (an unwrapped root's embeddings and final
    # norm) stays whole on every rank, and nothing averages its gradients across ranks
    owned = sum(u["params"] for u in model["fsdp2_units"]) if model["fsdp2_units"] else model["global_params"]
    outside = max(model["global_params"] - owned, 0)
    ev["outside_units_params"] = outside
    if outside > 0:
        params.update(outside=f"{outside:,}", share=f"{100 * outside / max(model['global_params'], 1):.1f}%")
        return Finding(CheckStatus.WARN, "outside_units", params, ev)
    if "SHARD_GRAD_OP" in w["strategies"]:
        return Finding(CheckStatus.WARN, "grad_op", params, ev)
    return Finding(CheckStatus.PASS, "ok", params, ev)


def check_wrap_units(run, max_fraction: float) -> Finding:
    """Is the model split into several FSDP units, so a forward gathers one block at a time?"""
    model = model_record(run)
    if model is None:
        return Finding(CheckStatus.FAIL, "no_model")  # the script built no model we could see: its fault
    w = wrapping(model)
    if w["api"] in ("DDP", "none"):
        return Finding(CheckStatus.FAIL, "not_fsdp", {"api": w["api"]})  # no FSDP: nothing to credit
    if replicated_beside(run, model):  # the units are a decoy's: the model that learned has none
        return Finding(CheckStatus.FAIL, "not_fsdp", {"api": "DDP"})
    top = max(peaks(run).values(), key=lambda p: p["peak"], default=None)
    params = {"units": w["units"], "largest": f"{100 * w['largest_fraction']:.0f}%",
              "peak": fmt_bytes(top["peak"] if top else None), "other": fmt_bytes(top["other"] if top else None)}
    ev = {"wrapping": w, "peak": top["peak"] if top else None}
    if w["units"] <= 1 or w["largest_fraction"] > max_fraction:
        return Finding(CheckStatus.WARN, "one_unit", params, ev)
    return Finding(CheckStatus.PASS, "ok", params, ev)


def outside_memory(run, baseline=None) -> dict[str, Any]:
    """The job cgroup's peak memory (all ranks with Python and torch, measured by the kernel) of the run and
    of the 1-card baseline, beside what the harness counted: evidence, not a verdict (the cgroup also holds
    each interpreter's ~300 MB, which tensor counts leave out). On a GPU host ``check_fit`` adds each card's
    reading (``graders.evidence.cards``), which is a verdict."""
    from graders.evidence import SOURCE_OUTSIDE

    def peak(r):
        return getattr(getattr(r, "result", None), "peak_memory_bytes", None) if r is not None else None
    host = ((getattr(run, "evidence", None) or {}).get("host") or {}) if run is not None else {}
    return {"source": SOURCE_OUTSIDE, "cgroup_peak_bytes": peak(run), "baseline_cgroup_peak_bytes": peak(baseline),
            "cpu_total_s": host.get("cpu_total_s"), "wall_s": host.get("wall_s"),
            "gpu": text("GPU 主机上评分程序用 nvidia-smi 在脚本之外读取每张卡（cards）；CPU 上没有显存可读",
                        "on a GPU host the grader reads each card with nvidia-smi, outside the script (cards); "
                        "a CPU run has no card to read")}


SIZE_TOLERANCE = 0.999  # the starter's sizes are exact parameter counts; a larger model (an untied head) is fine


def wrong_size(run, requested: dict | None) -> dict | None:
    """The model that trained, where it is smaller than the size the grader asked for (``requested``: ``size``
    and ``params``, the grader's own numbers): the card is scaled to the requested model, so a smaller one fitting
    it shows nothing. An unknown model (no described root that trained) counts as not shown."""
    if not requested:
        return None
    model = model_record(run)
    trained = count(model.get("global_params")) if model else None
    if trained is not None and trained >= SIZE_TOLERANCE * requested["params"]:
        return None
    return {"size": requested["size"], "requested": f"{requested['params']:,}",
            "trained": f"{trained:,}" if trained is not None else "?", "known": trained is not None}


def check_fit(run, capacity: float, card: str | dict[str, str], baseline=None, requested: dict | None = None) -> Finding:
    """Does every rank's peak stay under the simulated card? ``baseline``: the 1-card run; ``requested``: the
    size the grader passed (``size``, ``params``), which the model that trained must be."""
    found = oom_of(run)
    ranks = peaks(run)
    base = max(peaks(baseline).values(), key=lambda p: p["peak"], default=None) if baseline else None
    base_oom = oom_of(baseline) if baseline else None
    params: dict[str, Any] = {"capacity": fmt_bytes(capacity), "card": card,
                              "base_peak": fmt_bytes(base["peak"] if base else
                                                     (base_oom[1].get("allocated") if base_oom else None))}
    suffix = "_baseline" if (base or base_oom) else ""
    ev: dict[str, Any] = {"capacity": capacity, "ranks": ranks, "baseline": base, "baseline_oom": bool(base_oom),
                          "outside": outside_memory(run, baseline)}
    if found:
        r, rec = found
        params.update(rank=r, peak=fmt_bytes(rec.get("allocated")), step=rec.get("step", 0))
        return Finding(CheckStatus.FAIL, "oom" + suffix, params, ev)
    small = wrong_size(run, requested) if ranks else None
    if small:  # whatever its peak, the run did not train the model the card is scaled to
        params.update(small)
        return Finding(CheckStatus.FAIL, "wrong_size" if small["known"] else "unknown_size", params,
                       {**ev, "requested": requested, "trained_params": small["trained"]})
    card_ev = (getattr(run, "evidence", None) or {}).get("cards") if run is not None else None
    if card_ev:
        ev["outside"]["cards"] = card_ev
    over = cards.over_capacity(card_ev, capacity)
    if over:  # the driver's count, beyond the script's reach: a lifted fraction or a patched peak shows here
        reported = max((p["peak"] for p in ranks.values()), default=None)
        params.update(gpu=over[0], used=fmt_bytes(over[1]), allowance=fmt_bytes(cards.CONTEXT_ALLOWANCE),
                      peak=fmt_bytes(reported))
        return Finding(CheckStatus.FAIL, "over_outside", params, ev, fallback="over")
    blind = blinded(run) or blinded(baseline)
    if blind:  # the counter was switched off for part of the work: its peak says nothing, and that counts against
        r, rec = blind
        cg = ev["outside"].get("cgroup_peak_bytes")
        params.update(rank=r, step=rec["step"], where=rec["where"], cgroup=fmt_bytes(cg if isinstance(cg, int) else None))
        return Finding(CheckStatus.FAIL, "blind", params, {**ev, "blind": {"rank": r, **rec}})
    if not ranks:
        return Finding(CheckStatus.SKIP, "no_data")
    wrong = contradiction(run) or contradiction(baseline)
    if wrong:  # the peak cannot be below what was live at the same moment: the count missed memory
        r, m = wrong
        params.update(rank=r, step=m.get("step", 0), peak=fmt_bytes(m["peak"]), states=fmt_bytes(m["states"]),
                      params=fmt_bytes(m["params"]), grads=fmt_bytes(m["grads"]), optimizer=fmt_bytes(m["optimizer"]))
        return Finding(CheckStatus.FAIL, "contradiction", params, {**ev, "contradiction": {"rank": r, **m}}, fallback="over")
    worst_rank, worst = max(ranks.items(), key=lambda kv: kv[1]["peak"])
    params.update(rank=worst_rank, peak=fmt_bytes(worst["peak"]), pct=f"{100 * worst['peak'] / capacity:.0f}%",
                  params=fmt_bytes(worst["params"]), grads=fmt_bytes(worst["grads"]),
                  optimizer=fmt_bytes(worst["optimizer"]), other=fmt_bytes(worst["other"]))
    if worst["peak"] > capacity:
        return Finding(CheckStatus.FAIL, "over" + suffix, params, ev)
    return Finding(CheckStatus.PASS, "fits" + suffix, params, ev)


def model_losses(run, rank: int) -> list[float | None]:
    """Per optimizer step of one rank: the mean loss the trained model itself gave for that step's forwards (the
    harness reads the model's output, ``fsdp_mem.model_loss``), never the loss the script handed to backward or
    printed; None for a step with no reading."""
    s = run.ranks.get(rank) if run else None
    out = []
    for m in s.of("fsdp_mem") if s else []:
        v = m.get("model_loss")
        out.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None)
    return out


def mean_loss(run, first: bool, k: int = 2) -> float | None:
    """Mean over ranks of the model's own loss at the first (or last) ``k`` steps; None where a rank stepped
    ``2k`` times but some of those steps have no reading."""
    values = []
    for r in sorted(run.ranks):
        losses = model_losses(run, r)
        if len(losses) >= 2 * k:
            chosen = losses[:k] if first else losses[-k:]
            if any(v is None for v in chosen):
                return None
            values.extend(chosen)
    return statistics.mean(values) if values else None


def check_progress(run, min_drop: float, epoch_rows: int | None = None) -> Finding:
    """Does the loss fall and do the parameters change? Catches an optimizer built before wrapping. ``epoch_rows``:
    the samples one rank takes in an epoch of the grader's data set (see ``training.training_logic``)."""
    s = run.ranks.get(0) if run else None
    opts = s.of("fsdp_optimizer") if s else []
    end = s.first("fsdp_end") if s else None
    if not opts:
        return Finding(CheckStatus.FAIL, "no_steps")  # no optimizer step: the script did not train
    # every optimizer counts (a decoy's stepped first names none of the model's parameters)
    opt = {k: sum(count(o.get(k)) for o in opts) for k in ("params", "in_model", "with_grad")}
    opt["model_params"] = max(count(o.get("model_params")) for o in opts)
    ev = {"optimizer": opt, "optimizers": len(opts), "end": end}
    params = {"opt_params": opt["params"], "in_model": opt["in_model"], "with_grad": opt["with_grad"],
              "model_params": opt["model_params"]}
    moved = bool(end and end.get("sum_before") is not None and end.get("sum_after") is not None
                 and abs(end["sum_after"] - end["sum_before"]) > 1e-9 * max(abs(end["sum_before"]), 1.0))
    if opt["model_params"] and (opt["in_model"] == 0 or opt["with_grad"] == 0) and not moved:
        return Finding(CheckStatus.FAIL, "stale_optimizer", params, ev)
    stale = count(end.get("stale")) if end else 0
    if stale:  # part of the model never trained: an optimizer that lacks it (built before fully_shard replaced it)
        names = [n for n in end.get("stale_names") or [] if isinstance(n, str)][:8]
        params.update(stale=stale, checked=count(end.get("checked")), names=", ".join(n[:80] for n in names) or "?")
        return Finding(CheckStatus.FAIL, "partly_stale", params, ev)
    if end and end.get("sum_before") is not None and end.get("sum_after") is not None:
        before, after = end["sum_before"], end["sum_after"]
        if abs(after - before) <= 1e-9 * max(abs(before), 1.0):
            return Finding(CheckStatus.FAIL, "unchanged", params, ev)
    counts = [len(model_losses(run, r)) for r in sorted(run.ranks)]
    if max(counts, default=0) < 4:
        return Finding(CheckStatus.SKIP, "too_short", params, ev)
    first, last = mean_loss(run, True), mean_loss(run, False)
    if first is None or last is None:  # the model's own loss could not be read: the script's is no stand-in
        return Finding(CheckStatus.FAIL, "no_model_loss", params, ev)
    params.update(first=f"{first:.3f}", last=f"{last:.3f}", drop=f"{100 * (1 - last / first):.0f}%")
    ev.update(first_loss=first, last_loss=last)
    if last > first * (1 - min_drop):
        return Finding(CheckStatus.FAIL, "flat", params, ev)
    return training_logic(run, params, ev, epoch_rows) or Finding(CheckStatus.PASS, "ok", params, ev)

