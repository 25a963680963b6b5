"""ckpt.save of homework 3: how the checkpoint was written, judged by what the run left.

A full state dict is measured against the model that trained (``checks.model_record``), whatever format holds
it: the harness's ``fsdp_save`` records of ``torch.save``, and the files each rank left in the work folder
(``graders.evidence.files``: a full copy pickled, or written as raw bytes, by a rank other than 0 counts as
much as one it ``torch.save``d). A distributed checkpoint is judged by what its ``.metadata`` lists, read by
the grader (``graders.evidence.dcp``): every parameter of the model that trained, by name and global shape. A full
state dict rank 0 saved must hold the trained weights (``trained_weights``): the grader reads the file's tensors in a
sandbox (``graders.evidence.weights``) and sums them against the harness's sums of every rank's shard at the end:
absolute sums, and signed sums weighted by each element's position, so that the trained values in the wrong places
(rows interleaved by a hand-made gather) are not the trained model. A full copy is judged by the model's elements it
holds, whatever their dtype: a float16 or int8 copy of the whole model on every rank is a full copy on every rank.
"""
from __future__ import annotations

from typing import Any, Callable

from coursework.report import CheckStatus
from graders.checks.ddp import Finding
from graders.evidence import dcp, weights
from graders.fsdp_fit.checks import count, fmt_bytes, model_record


def check_checkpoint(run, global_param_bytes: float, mode: str) -> Finding:
    """How the checkpoint was written: distributed, rank-0 full on CPU, or full copies everywhere. A full copy is
    judged against the model that trained (``global_param_bytes``, the requested size's, only where no model
    was described); a distributed checkpoint by what its ``.metadata`` lists."""
    if not run or not run.ranks:
        return Finding(CheckStatus.SKIP, "no_data")
    left = _left_checkpoints(run)
    model = model_record(run)
    if model and count(model.get("global_params")):
        global_param_bytes = count(model.get("global_params")) * max(count(model.get("element_size")), 1)
    if any(s.first("fsdp_dcp") for s in run.ranks.values()):
        return _check_dcp(run, model, left)
    elements = count(model.get("global_params")) if model else 0
    full = {r: [x for x in s.of("fsdp_save") if not x["sharded"] and _whole(x, elements, global_param_bytes)]
            for r, s in run.ranks.items()}
    for r, files in _full_files(run, global_param_bytes).items():  # a copy no torch.save of the rank's explains
        full.setdefault(r, []).extend({"bytes": n, "devices": ["cpu"], "file": f} for f, n in files)
    full = {r: v for r, v in full.items() if v}
    saves = {r: len(s.of("fsdp_save")) for r, s in run.ranks.items()}
    ev = {"full_saves": {r: [x["bytes"] for x in v] for r, v in full.items()}, "saves": saves}
    if not any(saves.values()):
        return Finding(CheckStatus.WARN, "none", {}, ev)
    if len(full) > 1 or any(r != 0 for r in full):
        ranks = sorted(full)
        return Finding(CheckStatus.WARN, "every_rank", {"ranks": ", ".join(map(str, ranks)), "n": len(ranks),
                       "bytes": fmt_bytes(max(x["bytes"] for v in full.values() for x in v))}, ev)
    gathered = {r: max((g.get("bytes") or 0 for g in s.of("fsdp_gathered") if isinstance(g.get("bytes"), int)), default=0)
                for r, s in run.ranks.items() if r != 0}
    everywhere = sorted(r for r, b in gathered.items() if b >= 0.9 * global_param_bytes)
    ev["gathered_full_on"] = everywhere
    if full and everywhere:  # rank 0 saved, but every rank paid for a full copy (FSDP1 rank0_only=False)
        return Finding(CheckStatus.WARN, "gathered_everywhere", {"ranks": ", ".join(map(str, everywhere)),
                       "bytes": fmt_bytes(max(gathered.values()))}, ev, fallback="every_rank")
    if full:
        rec = full[0][0]
        opts = [o for o in run.ranks[0].of("fsdp_state_dict") if o["full_state_dict"]]
        on_card = "cuda" in rec["devices"] or (mode == "cpu" and opts and not any(o["cpu_offload"] for o in opts))
        if on_card:
            return Finding(CheckStatus.WARN, "on_card", {"bytes": fmt_bytes(rec["bytes"])}, ev)
        return Finding(CheckStatus.PASS, "rank0_cpu", {"bytes": fmt_bytes(rec["bytes"])}, ev)
    # Shards only: each rank's half must survive in a file no other rank also wrote (the grader lists the
    # folder after the run), or what is left is part of the model that nobody can load as a checkpoint.
    ev["left"] = left
    mine = {r: set(left.get(r, ())) - {f for o, files in left.items() if o != r for f in files}
            for r in range(run.nproc)}
    lost = [r for r in range(run.nproc) if not saves.get(r) or not mine[r]]
    if lost:
        savers = sorted(r for r, n in saves.items() if n)
        return Finding(CheckStatus.FAIL, "shards_lost", {"ranks": ", ".join(map(str, savers)),
                       "lost": ", ".join(map(str, lost))}, ev)
    return Finding(CheckStatus.PASS, "shards", {"n": len([r for r, n in saves.items() if n])}, ev)


def _whole(save: dict, elements: int, model_bytes: float) -> bool:
    """Does a ``torch.save`` hold the whole model? By its elements where the model's count is known, whatever their
    dtype (a float16 copy is half the bytes of the float32 model and still all of it); else by 0.9 of its bytes."""
    if elements and isinstance(save.get("elements"), int) and not isinstance(save.get("elements"), bool):
        return save["elements"] >= 0.9 * elements
    return save["bytes"] >= 0.9 * model_bytes


def _check_dcp(run, model: dict | None, left: dict[int, list[str]]) -> Finding:
    """A distributed checkpoint passes when a ``.metadata`` it left (read by the grader) lists every parameter of
    the model that trained, by name and global shape, and chunks that cover each; a step counter, part of the model
    or part of each tensor (only rank 0 called ``dcp.save``) is no checkpoint."""
    read = ((getattr(run, "evidence", None) or {}).get("dcp") or {}).get("checkpoints") or {}
    ev: dict[str, Any] = {"left": left, "dcp": {k: {"tensors": len((v or {}).get("tensors") or {}),
                                                     "error": (v or {}).get("error")} for k, v in read.items()}}
    if not read:
        return Finding(CheckStatus.FAIL, "dcp_no_metadata", {}, ev)  # no finished DCP checkpoint
    shapes = [x for x in (model or {}).get("param_shapes") or [] if isinstance(x, list) and len(x) == 2
              and isinstance(x[0], str) and isinstance(x[1], list)]
    if not shapes:  # the model that trained is unknown: what the checkpoint should hold cannot be shown
        return Finding(CheckStatus.FAIL, "dcp_unchecked", {}, ev)
    best = min(((path, *dcp.holds(meta, shapes)) for path, meta in read.items()), key=lambda t: len(t[1]))
    path, missing, wanted = best
    torn = dcp.partial(read[path], shapes) if not missing else []
    if torn:  # every global shape listed, but the chunks written cover part of it: only some ranks saved
        ev.update(partial=torn[:20], checked=wanted, metadata=path)
        return Finding(CheckStatus.FAIL, "dcp_partial", {"partial": len(torn), "total": wanted,
                       "names": ", ".join(n[:60] for n in torn[:5]), "file": path[:120]}, ev)
    if not missing:
        return Finding(CheckStatus.PASS, "dcp", {}, {**ev, "checked": wanted, "metadata": path})
    errors = [v.get("error") for v in read.values() if isinstance(v, dict) and v.get("error")]
    ev.update(missing=missing[:20], checked=wanted, metadata=path, errors=errors[:4])
    return Finding(CheckStatus.FAIL, "dcp_incomplete", {"missing": len(missing), "total": wanted,
                   "names": ", ".join(n[:60] for n in missing[:5]), "file": path[:120]}, ev)


def _full_files(run, model_bytes: float) -> dict[int, list[tuple[str, int]]]:
    """rank -> files (path, bytes) a rank other than 0 left, by the harness's record of its writes or by the rank
    its name gives, that are as large as the whole model and that no sharded ``torch.save`` of that rank wrote:
    a full copy written with pickle, NumPy or raw bytes, which the ``torch.save`` hook never saw."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    sizes = files.get("sizes") if isinstance(files.get("sizes"), dict) else {}
    owned: dict[int, dict[str, int]] = {}
    for r, paths in _left_checkpoints(run).items():
        for f in paths:
            if isinstance(sizes.get(f), int):
                owned.setdefault(r, {})[f] = sizes[f]
    for item in files.get("loose") or []:
        if isinstance(item, (list, tuple)) and len(item) in (4, 5) and isinstance(item[0], str) and isinstance(item[1], int):
            r = item[2] if isinstance(item[2], int) else item[3]
            if isinstance(r, int) and not isinstance(r, bool):
                owned.setdefault(r, {})[item[0]] = item[1]
    out: dict[int, list[tuple[str, int]]] = {}
    for r, found in owned.items():
        if r <= 0 or r >= run.nproc:
            continue
        sharded = [x.get("path") for x in (run.ranks[r].of("fsdp_save") if r in run.ranks else [])
                   if x.get("sharded") and isinstance(x.get("path"), str)]
        big = [(f, n) for f, n in sorted(found.items()) if n >= 0.9 * model_bytes
               and not any(p == f or p.endswith("/" + f) for p in sharded)]
        if big:
            out[r] = big[:4]
    return out


def _left_checkpoints(run) -> dict[int, list[str]]:
    """rank -> checkpoint files the run left (listed by the grader after it) that this rank wrote, or that no rank
    claimed and whose name gives this rank; ``-1`` -> unclaimed ones whose name gives no rank."""
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    sniffed = files.get("checkpoints") or {}
    out: dict[int, list[str]] = {}
    for r in range(run.nproc):
        got = sniffed.get(r, sniffed.get(str(r))) or []
        out[r] = [str(f) for f in got if isinstance(f, str)]
    for item in files.get("unclaimed") or []:
        if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
            named = item[1] if isinstance(item[1], int) and 0 <= item[1] < run.nproc else -1
            out.setdefault(named, []).append(item[0])
    return out


MAX_READ = 3  # checkpoint files of rank 0 read, largest first


def trained_weights(found: Finding, run, read: Callable[[str], dict]) -> Finding:
    """A full state dict rank 0 saved (``found``: ``rank0_cpu`` or ``on_card``) must hold the weights of the model
    that trained, not those of a fresh model of the same size. ``read``: a relative path in the work folder ->
    ``graders.evidence.weights.read``, the grader's own reading of the file. Compared with the sums of every
    rank's shard at the end (``fsdp_end.sum_after``); a file, a sum or a model that cannot be read counts against."""
    if found.key not in ("rank0_cpu", "on_card"):
        return found
    model = model_record(run)
    shapes = [x for x in (model or {}).get("param_shapes") or [] if isinstance(x, list) and len(x) == 2
              and isinstance(x[0], str) and isinstance(x[1], list)]
    ends = [run.ranks[r].first("fsdp_end") if r in run.ranks else None for r in range(run.nproc)]
    sums = [e.get("sum_after") for e in ends if isinstance(e, dict)]
    sums = [float(v) for v in sums if _number(v)]
    placed = [([float(x) for x in e["order"]], float(e["squares"])) for e in ends if isinstance(e, dict)
              and isinstance(e.get("order"), list) and 0 < len(e["order"]) <= 16
              and all(_number(x) for x in e["order"]) and _number(e.get("squares"))]
    placed = placed if len({len(o) for o, _ in placed}) == 1 else []  # every rank the same patterns
    files = (getattr(run, "evidence", None) or {}).get("files") or {}
    sizes = files.get("sizes") if isinstance(files.get("sizes"), dict) else {}
    mine = _left_checkpoints(run).get(0, [])
    paths = sorted(mine, key=lambda f: -(sizes.get(f) if isinstance(sizes.get(f), int) else 0))[:MAX_READ]
    ev = dict(found.evidence)
    if not shapes or len(sums) != run.nproc or len(placed) != run.nproc or not paths:
        ev["weights"] = {"model": bool(shapes), "sums": len(sums), "placed": len(placed), "files": paths}
        return Finding(CheckStatus.FAIL, "weights_unread", {**found.params}, ev)
    trained = sum(sums)
    trained_order = ([sum(col) for col in zip(*(o for o, _ in placed))], sum(q for _, q in placed))
    copies = _copies(model, run.nproc)
    readings = []
    for path in paths:
        got = read(path)
        compared = weights.holds_trained(got, shapes, trained, copies, trained_order) if "tensors" in got else None
        readings.append({"file": path, "error": got.get("error"), **(compared or {})})
        if compared and compared["holds"]:
            return Finding(found.status, found.key, found.params, {**ev, "weights": readings}, found.fraction)
    ev["weights"] = readings
    best = next((x for x in readings if "holds" in x), None)
    if best is None:
        return Finding(CheckStatus.FAIL, "weights_unread", {**found.params}, ev)
    shuffled = next((x for x in readings if x.get("summed") and x.get("in_place") is False
                     and not x.get("unordered")), None)
    if shuffled is not None:  # the trained values, not in their places: rows or columns put back wrongly
        k = max(range(len(trained_order[0])), key=lambda i: abs(shuffled["order"][i] - trained_order[0][i]))
        return Finding(CheckStatus.FAIL, "not_in_place", {**found.params, "file": shuffled["file"][:120],
                       "saved_order": f"{shuffled['order'][k]:.6g}", "trained_order": f"{trained_order[0][k]:.6g}"},
                       ev)
    return Finding(CheckStatus.FAIL, "not_trained", {**found.params, "file": best["file"][:120],
                   "matched": best["matched"], "total": len(shapes), "saved_sum": f"{best['sum']:.6g}",
                   "trained_sum": f"{trained:.6g}"}, ev)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _copies(model: dict, nproc: int) -> Callable[[str], int]:
    """How many ranks' end sums hold a parameter whole: one for a parameter an FSDP unit shards (its shards add up
    to it once), every rank for one no unit owns (a root left unwrapped, a DDP model): each rank has it all."""
    units = [u for u in (model.get("fsdp2_units") or []) + (model.get("fsdp1_units") or [])
             if isinstance(u, dict) and count(u.get("params")) and isinstance(u.get("name"), str)]
    prefixes = [weights.clean_key(u["name"]) for u in units]
    if any(p in ("", "(root)") for p in prefixes):
        return lambda name: 1
    return lambda name: 1 if any(name == p or name.startswith(p + ".") for p in prefixes) else nproc
