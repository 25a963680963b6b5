"""Integrity of a grading: tamper evidence, record validation, cross-checks, static scan.

What a rank's harness reports can be forged from inside the student's interpreter, so the
grader (a) validates every record against a schema (types, sizes, finite numbers, monotonic
step times, one end marker, the record count sealed at the end), (b) cross-checks claims
with what it measured outside the job (the wall-clock window of the run bounds every step
time; samples claimed must have been drawn from a DataLoader; ``WORLD_SIZE`` in the hello
must be torchrun's), (c) scans the upload's syntax tree for what honest training never
names (``ctypes``, closure cells, ``gc``'s object graph, the harness, the channel).

Every violation is an *integrity event* ``{"source", "kind", "rank", "detail"}``. Events
of a job are appended by ``graders.torchrun`` to ``<job>/integrity.jsonl`` (a grader-owned
file the sandbox cannot reach) and turned by ``finalize`` into the report status
``needs_review``: 0 points until an instructor accepts or rejects the grade. Event details
are for staff only; the student sees one neutral sentence.
"""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any

from graders.cifar import marks

INTEGRITY_FILE = "integrity.jsonl"
MAX_EVENTS = 64  # kept per job; further ones are counted
MAX_DETAIL = 300
MAX_STEP_ROWS = 1000  # rows in one "steps" record (the harness flushes every 25)
MAX_INDEX = 1 << 62
MAX_SEEN = 8192  # samples the harness reads per step (distgrade_harness.hooks)
MAX_PRINT_STEPS = 64  # prints whose optimizer step the harness keeps (distgrade_harness.hooks)
CLOCK_SLACK_S = 5.0  # the job's monotonic clock is the grader's; allow for start-up skew
MAX_STEPS_PER_S = 5000  # optimizer steps one rank can take per second of wall time (a tiny CPU model: ~1000)


def event(source: str, kind: str, detail: str = "", rank: int | None = None) -> dict[str, Any]:
    """One integrity event; every string is bounded and escaped (student text is data)."""
    return {"source": source, "kind": safe_text(kind, 80), "rank": rank, "detail": safe_text(detail, MAX_DETAIL)}


def safe_text(value: Any, limit: int) -> str:
    """A short, printable rendering of any value: ``ascii()``-escaped beyond plain text, cut."""
    s = value if isinstance(value, str) else repr(value)
    s = s[:limit * 2]
    if not s.isprintable() or not s.isascii():
        s = ascii(s)[1:-1]
    return s if len(s) <= limit else s[:limit - 1] + "…"


# -- records ---------------------------------------------------------------------------------------

def _is_int(x: Any, lo: int = 0, hi: int = MAX_INDEX) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def _is_num(x: Any, *, finite: bool = True) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return math.isfinite(x) or not finite


def _is_str(x: Any, limit: int) -> bool:
    return isinstance(x, str) and len(x) <= limit


def _list(x: Any, limit: int, item) -> bool:
    return isinstance(x, list) and len(x) <= limit and all(item(v) for v in x)


_OPT_INT = lambda x: x is None or _is_int(x)  # noqa: E731
_LOSS = lambda x: x is None or _is_num(x, finite=False)  # noqa: E731  (a diverging run has NaN losses)

SCHEMAS: dict[str, dict[str, Any]] = {
    "epoch": {"loader": lambda x: _is_int(x, -MAX_INDEX), "epoch": lambda x: _is_int(x, 0, 10**6),
              "kind": lambda x: x in ("map", "iterable"), "complete": lambda x: isinstance(x, bool),
              "batches": _is_int, "batch_size": _is_int,
              "indices": lambda x: _list(x, 50_000_000, lambda i: _is_int(i, -MAX_INDEX)),
              "dataset": lambda x: _is_str(x, 200), "num_workers": lambda x: _is_int(x, 0, 4096),
              "drop_last": lambda x: isinstance(x, bool), "sampler": lambda x: _is_str(x, 200),
              "persistent_workers": lambda x: isinstance(x, bool), "dataset_len": _OPT_INT},
    "steps": {"t": lambda x: _list(x, MAX_STEP_ROWS, _is_num), "samples": lambda x: _list(x, MAX_STEP_ROWS, _is_int),
              "loss": lambda x: _list(x, MAX_STEP_ROWS, _LOSS),
              "backwards": lambda x: _list(x, MAX_STEP_ROWS, _is_int), "buckets": lambda x: _list(x, MAX_STEP_ROWS, _is_int),
              "synced": lambda x: _list(x, MAX_STEP_ROWS, _is_int),
              "bucket_bytes": lambda x: _list(x, MAX_STEP_ROWS, _is_int)},
    "finished": {"steps": _is_int, "digest": lambda x: isinstance(x, str) and re.fullmatch(r"[0-9a-f]{64}", x),
                 "param_sums": lambda x: _list(x, 64, lambda v: _is_num(v, finite=False)),
                 "param_tensors": _is_int, "model_source": lambda x: _is_str(x, 40)},
    "ddp": {"batchnorm": _is_int, "syncbatchnorm": _is_int, "parameters": _is_int, "device": lambda x: _is_str(x, 80)},
    "optimizer": {"class": lambda x: _is_str(x, 200), "lr": lambda x: isinstance(x, list) and len(x) <= 8},
    "save": {"path": lambda x: _is_str(x, 400), "step": _is_int},
    "bn_calls": {"counts": lambda x: _list(x, 3, _is_int) and len(x) == 3},  # BatchNorm forwards so far, by their span
    "signal_sent": {"call": lambda x: _is_str(x, 40), "sig": lambda x: _is_int(x, -1, 128)},
    "prints": {"count": _is_int, "logging": _is_int, "tail": lambda x: _list(x, 5, lambda s: _is_str(s, 400))},
    "exception": {"exc_type": lambda x: _is_str(x, 200), "message": lambda x: _is_str(x, 2000),
                  "step": _is_int, "line": _OPT_INT, "code": lambda x: _is_str(x, 400),
                  "traceback": lambda x: _is_str(x, 5000)},
}


_is_short_digest = lambda x: isinstance(x, str) and re.fullmatch(r"[0-9a-f]{16}", x) is not None  # noqa: E731
_OPT_NUM = lambda x: x is None or _is_num(x)  # noqa: E731  (a reading the host cannot give is None)
_OPT_SKETCH = lambda x: x is None or _list(x, 8, _is_num)  # noqa: E731  (distgrade_harness.contrib.K numbers)
OPTIONAL_FIELDS: dict[str, dict[str, Any]] = {  # checked when present (what the harness measures per step)
    "steps": {"hand_reduced": lambda x: _list(x, MAX_STEP_ROWS, _is_num),
              "runqueue": lambda x: _list(x, MAX_STEP_ROWS, _OPT_NUM),
              "cpu": lambda x: _list(x, MAX_STEP_ROWS, _OPT_NUM),
              "data_wait": lambda x: _list(x, MAX_STEP_ROWS, _is_num),
              "seen": lambda x: _list(x, MAX_STEP_ROWS, lambda v: _list(v, MAX_SEEN, lambda i: _is_int(i, 0, marks.CAPACITY - 1))),
              "unread": lambda x: _list(x, MAX_STEP_ROWS, _is_int),
              "pd": lambda x: _list(x, MAX_STEP_ROWS, _is_short_digest),  # the trained parameters after the step
              # sketches of local and applied gradients and parameters (distgrade_harness.contrib), the local
              # gradient's squared norm, the bytes all-reduced
              **{k: lambda x: _list(x, MAX_STEP_ROWS, _OPT_SKETCH) for k in ("gl", "ga", "pl", "ps")},
              "gn": lambda x: _list(x, MAX_STEP_ROWS, _OPT_NUM),
              "gz": lambda x: _list(x, MAX_STEP_ROWS, _OPT_INT),
              "ar": lambda x: _list(x, MAX_STEP_ROWS, _is_int)},
    "prints": {"at_steps": lambda x: _list(x, MAX_PRINT_STEPS, _is_int)},  # optimizer steps taken at each print/log
    "epoch": {"local_len": _OPT_INT, "view": lambda x: _is_str(x, 200),
              "view_digest": lambda x: isinstance(x, str) and re.fullmatch(r"[0-9a-f]{16}", x) is not None},  # a view's own length (coverage counts it)
}


def schema_problem(record: Any) -> str | None:
    """Why ``record`` does not fit its type's schema, or None. Unknown types only get generic bounds
    (a newer harness may send more), so they are passed on but never trusted by a known check."""
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return "not a typed record"
    schema = SCHEMAS.get(record["type"])
    if schema is None:
        return None if len(record) <= 64 else "too many fields"
    optional = {k: v for k, v in OPTIONAL_FIELDS.get(record["type"], {}).items() if k in record}
    for key, ok in {**schema, **optional}.items():
        if key not in record:
            return f"{record['type']}: field {key} missing"
        try:
            good = ok(record[key])
        except Exception:  # a validator never raises on odd data
            good = False
        if not good:
            return f"{record['type']}: field {key} out of schema"
    return None


def validate_stream(rank: int, records: list[dict[str, Any]], *, window: tuple[float, float] | None,
                    sealed: int | None, lines: int, after_seal: int = 0,
                    truncated: bool = False) -> tuple[list[dict], list[dict]]:
    """(records that fit the schema, integrity events) for one rank's stream.

    ``window``: the grader's monotonic clock before and after the run; ``sealed``: the record
    count the harness sent at the end (None: no seal); ``lines``: records the grader received
    between hello and seal; ``truncated``: the grader stopped reading (its own limit), so counts
    cannot be compared.
    """
    events: list[dict] = []
    good: list[dict] = []
    bad = 0
    for rec in records:
        if isinstance(rec, dict) and (rec.get("oversize") or rec.get("unencodable")):
            continue  # the harness could not send it whole: not a claim, not evidence either
        problem = schema_problem(rec)
        if problem:
            bad += 1
            if bad <= 3:
                events.append(event("records", "schema", problem, rank))
            continue
        if rec["type"] == "optimizer":  # the student's values: numbers stay, anything else a short text
            rec["lr"] = [v if v is None or _is_num(v, finite=False) else safe_text(v, 40) for v in rec["lr"]]
        good.append(rec)
    if bad > 3:
        events.append(event("records", "schema", f"{bad} records out of schema in all", rank))
    finished = [r for r in good if r["type"] == "finished"]
    if len(finished) > 1:
        events.append(event("records", "finished_twice", f"{len(finished)} end markers", rank))
    if finished:
        idx = next(i for i, r in enumerate(good) if r["type"] == "finished")
        late = [r["type"] for r in good[idx + 1:] if r["type"] not in ("integrity", "finished")]
        if late:
            events.append(event("records", "after_end", f"records after the end marker: {late[:5]}", rank))
        if sealed is None and not truncated:
            events.append(event("records", "no_seal", "an end marker without the stream's seal", rank))
    if sealed is not None and sealed != lines and not truncated:
        events.append(event("records", "seal_count", f"sealed {sealed} records, received {lines}", rank))
    if after_seal:
        events.append(event("records", "after_seal", f"{after_seal} records after the seal", rank))
    events.extend(_cross_check(rank, good, window, counts=not truncated))
    return good, events


def _cross_check(rank: int, records: list[dict], window: tuple[float, float] | None,
                 counts: bool = True) -> list[dict]:
    events = []
    times = [t for r in records if r["type"] == "steps" for t in r["t"]]
    rows = sum(len(r["t"]) for r in records if r["type"] == "steps")
    for r in records:
        columns = [*SCHEMAS["steps"], *(k for k in OPTIONAL_FIELDS["steps"] if k in r)] if r["type"] == "steps" else []
        if columns and len({len(r[k]) for k in columns}) != 1:
            events.append(event("records", "steps_shape", "step columns of different lengths", rank))
            break
    if any(b < a for a, b in zip(times, times[1:])):
        events.append(event("crosscheck", "time_order", "step times go backwards", rank))
    if times and window is not None:
        lo, hi = window[0] - CLOCK_SLACK_S, window[1] + CLOCK_SLACK_S
        outside = sum(1 for t in times if not lo <= t <= hi)
        if outside:
            events.append(event("crosscheck", "time_window",
                                f"{outside} step times outside the run's wall-clock window "
                                f"({window[1] - window[0]:.1f} s)", rank))
        if rows > (window[1] - window[0] + CLOCK_SLACK_S) * MAX_STEPS_PER_S:
            events.append(event("crosscheck", "step_rate", f"{rows} steps in {window[1] - window[0]:.1f} s of wall time",
                                rank))
    fin = next((r for r in records if r["type"] == "finished"), None)
    if fin is not None and counts and fin["steps"] != rows:
        events.append(event("crosscheck", "step_count", f"end marker claims {fin['steps']} steps, {rows} recorded", rank))
    if fin is not None and counts:  # at the end every consumed batch was flushed as part of an epoch record
        drawn = sum(len(r["indices"]) for r in records if r["type"] == "epoch" and r["kind"] == "map")
        claimed = max((s for r in records if r["type"] == "steps" for s in r["samples"]), default=0)
        if claimed > drawn:
            events.append(event("crosscheck", "samples", f"steps claim {claimed} samples, loaders gave {drawn}", rank))
    seen: dict[Any, int] = {}
    for r in records:
        if r["type"] == "epoch":
            prev = seen.get(r["loader"], -1)
            if r["epoch"] <= prev:
                events.append(event("records", "epoch_order", "epoch numbers repeat or go backwards", rank))
                break
            seen[r["loader"]] = r["epoch"]
            n = len(r["indices"])
            if r["kind"] == "map" and (r["batches"] > n or r["batches"] * max(r["batch_size"], 1) < n):
                events.append(event("records", "epoch_shape", "batches and indices disagree", rank))
                break
    return events


def check_hello(rank: int, hello: dict[str, Any], nproc: int) -> list[dict]:
    """The rank's hello against what torchrun was asked for."""
    events = []
    if hello.get("world") != nproc:
        events.append(event("crosscheck", "world_size", f"hello says {safe_text(hello.get('world'), 20)} "
                            f"processes, torchrun started {nproc}", rank))
    if hello.get("rank") != rank:
        events.append(event("crosscheck", "rank", "hello rank differs from the token's rank", rank))
    return events


def harness_event(rank: int | None, rec: Any) -> dict[str, Any]:
    """An integrity record from a harness (on its stream or on an alarm connection)."""
    if not isinstance(rec, dict):
        return event("harness", "integrity", "malformed integrity record", rank)
    where = safe_text(rec.get("where", ""), 80)
    return event("harness", str(rec.get("event", "?"))[:60],
                 f"{safe_text(rec.get('detail', ''), 160)}{' at ' + where if where else ''}", rank)


# -- the job's event file ------------------------------------------------------------------------------

def append_events(job: Path, events: list[dict[str, Any]], tag: str = "") -> None:
    """Append events to the job's grader-owned integrity file (bounded)."""
    if not events:
        return
    path = Path(job) / INTEGRITY_FILE
    try:
        have = sum(1 for _ in path.open()) if path.exists() else 0
    except OSError:
        have = 0
    with path.open("a", encoding="utf-8") as f:
        for ev in events[:max(0, MAX_EVENTS - have)]:
            f.write(json.dumps({**ev, "run": tag}, ensure_ascii=True) + "\n")
        if len(events) > MAX_EVENTS - have:
            f.write(json.dumps(event("grader", "more", f"{len(events) - max(0, MAX_EVENTS - have)} more events "
                                     "not kept"), ensure_ascii=True) + "\n")


def load_events(job: Path) -> list[dict[str, Any]]:
    path = Path(job) / INTEGRITY_FILE
    out = []
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return out[:MAX_EVENTS + 1]


# -- static scan -------------------------------------------------------------------------------------

# Only what honest training has no use for. ``import gc`` (gc.collect) and frame introspection (a logging
# helper reading its caller's line, traceback printing) are honest: the audit hook judges them at run time,
# where it sees whether the harness was reached (gc.get_objects, a frame with the harness below it).
BANNED_MODULES = {"ctypes": "raw memory access",
                  "_ctypes": "raw memory access", "cffi": "raw memory access",
                  "distgrade_harness": "the grader's harness", "sitecustomize": "the grader's start-up hook"}
BANNED_ATTRS = {"_current_frames": "every thread's frames",
                "__closure__": "closure introspection", "cell_contents": "closure introspection",
                "settrace": "tracing hooks", "setprofile": "tracing hooks", "addaudithook": "audit hooks",
                "get_objects": "the object graph", "get_referrers": "the object graph",
                "get_referents": "the object graph"}
BANNED_CALLS = {("importlib", "reload")}
BANNED_STRINGS = (("distgrade_harness", "the grader's harness"), ("distgrade_channel", "the grader's record channel"), ("/proc/self/fd", "the process's descriptors"),
                  ("/proc/self/mem", "the process's memory"))
MAX_SCAN_BYTES = 2 * 1024 * 1024
MAX_FINDINGS = 20


def scan_source(source: str, filename: str = "<upload>") -> list[dict[str, Any]]:
    """Static scan of one Python source: integrity events for names honest training never uses.

    An AST walk (names in comments or docstrings do not count; ``getattr(x, "__closure__")``
    and ``__import__("gc")`` do, through their string constants). A file that does not parse
    is not flagged here: running it fails on its own.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: dict[str, dict] = {}
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}

    def flag(node: ast.AST, what: str, why: str) -> None:
        key = what
        if key not in found and len(found) < MAX_FINDINGS:
            found[key] = event("static", "scan", f"{filename}:{getattr(node, 'lineno', 0)}: {what} ({why})")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in BANNED_MODULES:
                    flag(node, f"import {alias.name}", BANNED_MODULES[root])
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if root in BANNED_MODULES:
                flag(node, f"from {node.module} import", BANNED_MODULES[root])
            for alias in node.names:
                if alias.name in BANNED_ATTRS:
                    flag(node, f"from {node.module} import {alias.name}", BANNED_ATTRS[alias.name])
                if (root, alias.name) in BANNED_CALLS:
                    flag(node, f"from {root} import {alias.name}", "re-import")
        elif isinstance(node, ast.Attribute):
            if node.attr in BANNED_ATTRS:
                flag(node, f".{node.attr}", BANNED_ATTRS[node.attr])
            if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in BANNED_CALLS:
                flag(node, f"{node.value.id}.{node.attr}", "re-import")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            value = node.value
            if value in BANNED_MODULES:
                flag(node, f"'{value}'", BANNED_MODULES[value])
            elif value in BANNED_ATTRS:
                flag(node, f"'{value}'", BANNED_ATTRS[value])
            else:
                low = value.lower()
                for needle, why in BANNED_STRINGS:
                    if needle in low:
                        flag(node, f"a string naming {needle!r}", why)
                        break
    return list(found.values())


def scan_files(files: list[Path]) -> list[dict[str, Any]]:
    """``scan_source`` over the uploaded Python files (other uploads are data, not code run by a harness)."""
    events = []
    for path in files:
        path = Path(path)
        if path.suffix != ".py":
            continue
        try:
            raw = path.read_bytes()[:MAX_SCAN_BYTES]
        except OSError:
            continue
        events += scan_source(raw.decode("utf-8", errors="replace"), path.name)
    return events[:MAX_FINDINGS]


# -- the report -----------------------------------------------------------------------------------

def finalize(report, job: Path, files: list[Path]):
    """Last step of every grading: move check tracebacks to staff, apply the job's integrity events.

    Any event (from the runs' channel and records, the harness's audit hook, or the static scan)
    puts the report in ``needs_review`` with 0 points; the computed grade is kept for the
    instructor's decision.
    """
    from graders.checks_runner import move_tracebacks

    move_tracebacks(report)
    events = load_events(job) + scan_files(files)
    if events:
        report.mark_for_review(events)
    return report
