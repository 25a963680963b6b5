"""What a full checkpoint rank 0 saved holds, read by the grader: each tensor's absolute sum.

The file is the student's, so it is read in a sandboxed process of the grader's (``checkpoint_sums.py``: weights
only, no code), never in the grader. ``holds_trained`` compares it with the model that trained: the harness sums
the absolute values of every rank's shard of that module's parameters when the run ends (``fsdp_end.sum_after``),
and the sums of the checkpoint's tensors named like those parameters (``fsdp_model.param_shapes``) must add up to
the same total. A freshly built model of the right size and shapes passes the size and the names, not this.
The absolute sum cannot see order: the same values with rows interleaved (shards concatenated on the wrong
dimension) give it too. So each tensor's signed sum weighted by position (``distgrade_harness.order``, every rank's
shard at the end: ``fsdp_end.order``) must add up as well, within a share of the model's L2 norm
(``fsdp_end.squares``): a moved value changes it by about the norm of what moved, low precision or TF32 by a
thousandth of it.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from graders.evidence import SOURCE_OUTSIDE, reader

SCRIPT = Path(__file__).resolve().parent / "checkpoint_sums.py"
MAX_CHECKPOINT_BYTES = 16 * 1024 ** 3  # the 1b model in fp32 is 4.7 GB, 14 GB with AdamW states; mapped, not copied
READ_WALL_S = 120  # importing torch on a loaded 2-core host
TOLERANCE = 1e-4  # relative: the same float32 values summed in float64 in another order
ORDER_TOLERANCE = 0.05  # of the L2 norm: bf16 rounding moves the signed sum by about 0.002 of it, a shuffle by 1.4
DRIFT = 0.1  # of the sums of the other ranks' copies of unsharded parameters, which nothing keeps equal to rank 0's
_WRAPPERS = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod", "module")


def read(path: Path, job: Path) -> dict[str, Any]:
    """``{"source", "file", "tensors": {key: [shape, abs sum]}}`` or ``{"source", "file", "error"}``."""
    out: dict[str, Any] = {"source": SOURCE_OUTSIDE, "file": path.name[:200]}
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_CHECKPOINT_BYTES:
            return {**out, "error": "not a regular file of a readable size"}
    except OSError as exc:
        return {**out, "error": f"unreadable: {type(exc).__name__}"}
    got, result = reader.run(SCRIPT, [str(path)], [str(path)], job / "checkpoint_sums", READ_WALL_S)
    if got is None:
        return {**out, "error": f"the reading failed (exit {result.returncode}, {result.killed_reason or 'no kill'})"}
    if not isinstance(got, dict) or not isinstance(got.get("tensors"), dict):
        return {**out, "error": str(got.get("error") if isinstance(got, dict) else "no reading")[:200]}
    return {**out, "tensors": got["tensors"]}


def _sums(value: Any, width: int) -> bool:
    """Is ``value`` a list of ``width`` finite numbers (a tensor's signed sums by position)?"""
    return (isinstance(value, list) and len(value) == width and width > 0
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < float("inf") for x in value))


def clean_key(key: str) -> str:
    """A key without the FSDP1, activation-checkpointing, torch.compile and DDP wrappers' segments."""
    return ".".join(p for p in key.split(".") if p and p not in _WRAPPERS)


def holds_trained(read_: dict[str, Any], shapes: list[list], trained_sum: float,
                  copies: Callable[[str], int] = lambda name: 1,
                  trained_order: tuple[list[float], float] | None = None) -> dict[str, Any]:
    """Does the checkpoint hold the trained weights? For each parameter (``[[name, dims], ...]``) the first tensor
    whose key is the name or ends with ``.name`` (a nested ``{"model": ...}``), or else with the name less its
    leading segments (a wrapper's prefix the saved keys lack), with the same shape: their sums, each
    times ``copies(name)`` (the ranks that hold it whole: a parameter no FSDP unit owns is on every rank), must add
    up to ``trained_sum``; and, given ``trained_order`` (every rank's shard: the signed sums by position, one per
    sign pattern, and the sum of squares), their signed sums by position, each times ``copies(name)``, must add up
    to the first, pattern by pattern, within ``ORDER_TOLERANCE`` of the square root of the second (``in_place``).
    A tensor read without its signed sums counts as out of place.
    ``{"matched", "missing", "sum", "trained", "order", "trained_order", "summed", "in_place", "unordered",
    "holds"}``."""
    tensors = read_.get("tensors") if isinstance(read_.get("tensors"), dict) else {}
    by_name: dict[str, list] = {}
    for key, value in tensors.items():
        if not (isinstance(value, list) and len(value) in (2, 3) and isinstance(value[1], (int, float))):
            continue
        parts = clean_key(str(key)).split(".")
        for i in range(len(parts)):
            by_name.setdefault(".".join(parts[i:]), []).append(value)
    width = len(trained_order[0]) if trained_order is not None else 0
    total, other_copies, missing, order, unordered = 0.0, 0.0, [], [0.0] * width, 0
    for name, dims in shapes:
        # the name itself, else without its leading segments: a module of the student's around the model that
        # trained (self.inner) prefixes every name, and saving the model inside it leaves the prefix out
        parts = clean_key(name).split(".")
        found = next((v for i in range(len(parts)) for v in by_name.get(".".join(parts[i:]), [])
                      if list(v[0]) == list(dims)), None)
        if found is None:
            missing.append(name)
        else:
            total += copies(name) * float(found[1])
            if _sums(found[2] if len(found) == 3 else None, width):
                order = [o + copies(name) * float(x) for o, x in zip(order, found[2])]
            else:
                unordered += 1
            other_copies += (copies(name) - 1) * abs(float(found[1]))
    # the other ranks' copies of a parameter no unit owns are not averaged with rank 0's: they drift apart a little
    allowed = TOLERANCE * max(abs(trained_sum), 1e-12) + DRIFT * other_copies
    summed = not missing and abs(total - trained_sum) <= allowed
    in_place = None
    if trained_order is not None:
        want, squares = trained_order
        allowed_order = ORDER_TOLERANCE * max(squares, 0.0) ** 0.5 + DRIFT * other_copies
        in_place = not unordered and all(abs(o - w) <= allowed_order for o, w in zip(order, want))
    return {"matched": len(shapes) - len(missing), "missing": missing[:20], "sum": total, "trained": trained_sum,
            "order": order, "trained_order": None if trained_order is None else trained_order[0],
            "summed": summed, "in_place": in_place, "unordered": unordered, "holds": summed and in_place is not False}
