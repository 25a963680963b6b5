"""The trained model, evaluated by the grader: rank 0's final parameters on held-out data.

The grader makes the synthetic data (``graders.cifar``), so it can draw more samples of the same
classes that no script ever saw. Rank 0's harness writes its final parameters at exit (the
module that owns the stepped parameters, with its buffers, else the parameters in optimizer order);
without that file, the script's own checkpoint (what the chapter's checklist says rank 0
saves) is tried. ``evaluate_model.py`` loads them weights-only in a sandboxed process of the
grader's and scores them. A run whose model stays below the floor learned nothing, whatever its
records say (``learned_nothing``). A finished run whose model cannot be scored here (no file,
weights that do not fit the assignment's network) is held for review with the reason (``unscored``).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from coursework.report import text
from graders import cifar
from graders.evidence import SOURCE_OUTSIDE, reader

SCRIPT = Path(__file__).resolve().parent / "evaluate_model.py"
HARNESS_FILE = "model-rank0.pt"
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024
EVAL_WALL_S = 240  # importing torch on a loaded 2-core host alone can take a minute
_SET_ASIDE = contextvars.ContextVar("model_floor_set_aside", default=False)


# Why the sandboxed evaluation (``evaluate_model.py``) could not score a file: its fixed reasons, readable.
_UNSCORED = {
    "not a dict of tensors": ("不是由张量组成的字典", "not a dict of tensors"),
    "parameters do not match the assignment's model": ("参数与作业的模型不符", "parameters do not match the assignment's model"),
    "names or shapes differ from the assignment's model": ("参数名或形状与作业的模型不同",
                                                           "names or shapes differ from the assignment's model"),
    "unknown reason": ("未知原因", "unknown reason"),
}


def _unscored(why: str) -> dict[str, str]:
    """The evaluation's reason in both languages (``unreadable: <exception type>`` keeps its type name)."""
    if why in _UNSCORED:
        return text(*_UNSCORED[why])
    if why.startswith("unreadable: "):
        return text(f"无法读取：{why.removeprefix('unreadable: ')}", why)
    return text(why, why)


def write_held_out(path: Path, synthetic: dict, n: int) -> Path:
    """``n`` fresh samples of the synthetic classes (the job's patterns, another draw of their noise)."""
    seed = int(synthetic.get("seed", 0))
    rng = np.random.default_rng(seed)
    patterns = cifar.class_patterns(rng)  # exactly as cifar.write_synthetic draws them first
    held = np.random.default_rng([seed, 27, 1])
    labels = held.integers(0, 10, size=n)
    ids = held.integers(0, cifar.marks.CAPACITY, size=n)  # marked like any sample, so the model sees its usual input
    np.savez(path, x=cifar.images(held, labels, patterns, ids), y=labels)
    path.chmod(0o644)
    return path


def candidates(chan: Path, work: Path, left: dict[str, int], stream=None) -> list[Path]:
    """Model files to score, best first: the harness's dump (only if rank 0's ``model`` record names
    exactly these bytes: the channel folder is writable by the ranks), then the script's checkpoints."""
    out = []
    dumped = chan / HARNESS_FILE
    told = stream.first("model") if stream is not None else None
    if (isinstance(told, dict) and told.get("saved") is True and dumped.is_file() and not dumped.is_symlink()
            and dumped.stat().st_size <= MAX_CHECKPOINT_BYTES and _sha256(dumped) == told.get("sha256")):
        out.append(dumped)
    for path, size in sorted(left.items()):
        if path.endswith(CHECKPOINT_SUFFIXES) and 0 < size <= MAX_CHECKPOINT_BYTES and len(out) < 4:
            out.append(Path(path))
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def evaluate(runs: list, job: Path, cfg: dict, synthetic: dict | bool | None = True) -> None:
    """Score rank 0's model of each run (one sandboxed process for all) into ``run.evidence["model"]``.

    ``synthetic``: the job's synthetic set's parameters (``graders.ddp_speedup.job.data_dir``: its secret seed),
    True for the assignment's own, None or False for the real CIFAR-10.

    Only on the grader's synthetic data: for the real CIFAR-10 the grader has no sample the script
    could not have read, so nothing is scored and the evidence says why."""
    spec = cfg.get("model_eval")
    if not spec:
        return
    if not synthetic:
        for run in runs:
            run.evidence["model"] = {"source": SOURCE_OUTSIDE, "evaluated": False, "real_data": True,
                                     "why": text("真实的 CIFAR-10：评分程序没有自己的留出数据", "real CIFAR-10: the grader has no held-out data of its own")}
        return
    todo: dict[int, list[Path]] = {}
    for i, run in enumerate(runs):
        files = run.evidence.get("_candidates") or []
        todo[i] = files
        run.evidence["model"] = {"source": SOURCE_OUTSIDE, "evaluated": False,
                                 "why": text("没有模型文件：rank 0 没有保存，harness 也没写出",
                                              "no model file: rank 0 saved nothing and its harness wrote nothing")}
    files = [f for fs in todo.values() for f in fs]
    if not files:
        return
    groups = [str(f) for i in sorted(todo) for f in [*todo[i], "--"]]
    params = synthetic if isinstance(synthetic, dict) else cfg.get("synthetic", {})  # the job's own seed
    data = write_held_out(job / "held_out.npz", params, int(spec.get("samples", 1000)))
    factory = Path(cfg["_path"]) / spec["factory_file"]
    started = time.monotonic()
    scores, result = reader.run(SCRIPT, [str(factory), spec["factory"], str(data), *groups],
                                [str(factory), str(data), *(str(f) for f in files)], job / "evaluate", EVAL_WALL_S)
    if not isinstance(scores, dict):
        for run in runs:
            run.evidence["model"]["why"] = text(f"评估失败（退出码 {result.returncode}）", f"the evaluation failed (exit "
                                                f"{result.returncode}, {result.killed_reason or 'no kill'})")
            run.evidence["model"]["stderr_tail"] = result.stderr[-200:]
        return
    floor = float(spec["min_accuracy"])
    seconds = round(time.monotonic() - started, 2)  # what this evidence costs a grading (bench/ddp_grader.py)
    for i, run in enumerate(runs):
        inconclusive = False
        for f in todo[i]:
            got = scores.get(str(f))
            if isinstance(got, dict) and got.get("evaluated") and got.get("by_position") and not _passes(got, floor):
                # weights of a class of the student's own, fitted to the assignment's network by order and shape:
                # its forward may differ, so a low score there says nothing about the student's model
                run.evidence["model"]["why"] = text(f"权重只能按顺序和形状装进作业的网络，在那里得分 {_percent(got)}，不能说明问题",
                                                    f"the weights fit the assignment's network only by order and shape, "
                                                    f"and scored {_percent(got)} there: not conclusive")
                inconclusive = True
                continue
            if isinstance(got, dict) and got.get("evaluated"):
                run.evidence["model"] = {"source": SOURCE_OUTSIDE, "evaluated": True, "file": f.name,
                                         "accuracy": got.get("accuracy"), "chance": 0.1,
                                         "min_accuracy": floor, "how": got.get("how"),
                                         "learned": _passes(got, floor), "seconds": seconds,
                                         "by_position": bool(got.get("by_position")),
                                         "parameters": got["parameters"] if isinstance(got.get("parameters"), int)
                                         and not isinstance(got.get("parameters"), bool) else None}
                break
            if isinstance(got, dict) and not inconclusive:
                run.evidence["model"]["why"] = _unscored(str(got.get("why", ""))[:200])


def _passes(got: dict, floor: float) -> bool:
    return float(got.get("accuracy") or 0) >= floor


def _percent(got: dict) -> str:
    return f"{100 * float(got.get('accuracy') or 0):.0f}%"


def learned_nothing(run) -> bool:
    """True when the grader scored rank 0's final model below the floor: the model is the floor under
    every other check, so the run did not train, whatever its records say (a loss held flat at ln 10
    is as much the script's choice as a loss that falls). A run the grader stopped early is exempt:
    it cut the training short itself, and the run's other evidence already settles its checks."""
    if _SET_ASIDE.get():
        return False
    return below_floor(run)


def below_floor(run) -> bool:
    """``learned_nothing`` whether or not the floor is set aside: what decides the points of every check."""
    ev = getattr(run, "evidence", None) or {}
    model = ev.get("model") or {}
    return bool(model.get("evaluated")) and not model.get("learned") and not getattr(run, "stopped", None)


@contextlib.contextmanager
def floor_set_aside() -> Iterator[None]:
    """Inside: ``learned_nothing`` is False, so a check judges the run on its own evidence. Only to say what a
    check saw under the floor (``graders.ddp_speedup.floor``); its points still follow ``below_floor``."""
    token = _SET_ASIDE.set(True)
    try:
        yield
    finally:
        _SET_ASIDE.reset(token)


def unscored(run) -> dict | None:
    """Why the grader could not score the model of a run that finished on the grader's own data
    (no model file, weights that do not fit the assignment's network, an evaluation that failed), or
    None. Such a run is held for review with this reason: missing evidence never passes unseen.
    None where nothing was to be scored: no model evaluation, the real CIFAR-10, a run that did not
    finish or was stopped by the grader (its checks fail or are settled without the model)."""
    model = (getattr(run, "evidence", None) or {}).get("model")
    if not isinstance(model, dict) or model.get("evaluated") or model.get("real_data"):
        return None
    if getattr(run, "stopped", None) or not getattr(run, "all_finished", False):
        return None
    return model.get("why") or text("未知原因", "unknown reason")
