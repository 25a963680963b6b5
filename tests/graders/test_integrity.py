"""Integrity as pure functions: static scan, record validation and cross-checks, the channel's
bounds, the report's size cap and review status, and check isolation. The same attacks run end
to end as samples (``assignments/ddp_speedup/samples/hostile_*``) in ``test_samples.py``."""
from __future__ import annotations

import json
import math
import socket
import time
from pathlib import Path

import pytest

from coursework.report import CheckResult, CheckStatus, GradeReport, ReportStatus, text
from graders import checks_runner, integrity, torchrun
from graders.checks import ddp
from graders.sandbox import SandboxResult
from graders.torchrun import ChannelServer, RankStream, TorchrunRun

ROOT = Path(__file__).resolve().parents[2]


# -- static scan ------------------------------------------------------------------------------------

def _python_files_that_must_be_clean() -> list[Path]:
    """Reference solutions, starters and every sample not expected to end in review (hostile ones included)."""
    out = []
    for a in ROOT.glob("assignments/*"):
        out += sorted(a.glob("solution/*.py")) + sorted(a.glob("starter/*.py"))
        for sample in sorted(a.glob("samples/*")):
            expected = sample / "expected.json"
            if expected.is_file() and json.loads(expected.read_text()).get("status") != "needs_review":
                out += sorted(sample.rglob("*.py"))
    return out


def test_static_scan_is_silent_on_every_honest_script() -> None:
    files = _python_files_that_must_be_clean()
    assert len(files) > 20
    flagged = {str(p.relative_to(ROOT)): integrity.scan_files([p]) for p in files}
    assert {k: v for k, v in flagged.items() if v} == {}


def test_static_scan_sees_the_gc_forgery() -> None:
    events = integrity.scan_files([ROOT / "assignments/ddp_speedup/samples/hostile_forge_stream_gc/train.py"])
    assert any("get_objects" in e["detail"] for e in events)
    assert all(e["source"] == "static" for e in events)


@pytest.mark.parametrize("code", [
    "import gc\ngc.get_objects()\n", "from gc import get_referrers\n", "from ctypes import cast\n",
    "import ctypes.util\n", "v = fn.__closure__[0].cell_contents\n", "getattr(fn, '__closure__')\n",
    "__import__('gc').get_referents(x)\n", "import importlib\nimportlib.reload(torch)\n",
    "import os\nos.listdir('/proc/self/fd')\n", "import sys\nsys._current_frames()\n",
    "import os\np = os.environ['DISTGRADE_CHANNEL']\n", "import sys\nsys.settrace(lambda *a: None)\n",
])
def test_static_scan_flags(code: str) -> None:
    assert integrity.scan_source(code), code


@pytest.mark.parametrize("code", [
    '"""We never import gc or use sys._getframe here."""\nimport torch\n',  # docstrings are prose
    "# import gc\nimport os\n", "model.eval()\n", "import inspect\ninspect.signature(print)\n",
    "import sys\nif 'torch_xla' in sys.modules: pass\n", "def f(:\n",  # a syntax error is not a finding
    "import logging\nlogging.getLogger(__name__).info('epoch %d', 1)\n",
    # honest: gc.collect, and frame introspection (judged at run time by the audit hook, which sees the harness)
    "import gc\ngc.collect()\n", "import gc as g\ng.disable()\ng.enable()\n",
    "import sys\nname = sys._getframe(1).f_code.co_name\n", "import inspect\nline = inspect.currentframe().f_back.f_lineno\n",
    "import inspect\nfor fr in inspect.stack(): pass\n", "import traceback\ntraceback.print_exc()\n",
])
def test_static_scan_ignores(code: str) -> None:
    assert integrity.scan_source(code) == []


# -- records ------------------------------------------------------------------------------------

def _honest(rank: int = 0, t0: float = 100.0, steps: int = 10, n: int = 80) -> list[dict]:
    return [
        {"type": "audit", "installed": True},
        {"type": "ddp", "batchnorm": 0, "syncbatchnorm": 2, "parameters": 10, "device": "cpu"},
        {"type": "optimizer", "class": "SGD", "lr": [0.1]},
        {"type": "epoch", "loader": 7, "epoch": 0, "kind": "map", "complete": True, "batches": steps,
         "batch_size": 4, "indices": list(range(rank, n, 2)), "dataset": "TensorDataset", "num_workers": 0,
         "drop_last": False, "sampler": "DistributedSampler", "persistent_workers": False, "dataset_len": n},
        {"type": "steps", "t": [t0 + 0.1 * i for i in range(steps)], "samples": [4 * (i + 1) for i in range(steps)],
         "loss": [float("nan")] + [1.0] * (steps - 1), "backwards": [1] * steps, "buckets": [1] * steps,
         "synced": [1] * steps, "bucket_bytes": [40] * steps},
        {"type": "prints", "count": 1, "logging": 0, "tail": ["epoch 0"]},
        {"type": "finished", "steps": steps, "digest": "ab" * 32, "param_sums": [1.0], "param_tensors": 1,
         "model_source": "ddp"},
    ]


def _validate(records, window=(99.0, 120.0), sealed="auto", after_seal=0):
    lines = len(records)
    return integrity.validate_stream(0, records, window=window, sealed=lines if sealed == "auto" else sealed,
                                     lines=lines, after_seal=after_seal)


def test_an_honest_stream_has_no_event_and_keeps_every_record() -> None:
    recs = _honest()
    good, events = _validate(recs)
    assert events == [] and len(good) == len(recs)


def _kinds(events) -> set[str]:
    return {e["kind"] for e in events}


def test_step_times_outside_the_measured_window_are_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "time_window" in _kinds(_validate(_honest(t0=500.0))[1])  # "faster" than the run allowed
    assert "time_window" in _kinds(_validate(_honest(t0=50.0))[1])
    monkeypatch.setattr(integrity, "MAX_STEPS_PER_S", 100)
    many = _honest(steps=900, n=8000)  # 900 steps claimed in a 0.1 s run (+5 s slack) at most 100/s
    assert "step_rate" in _kinds(_validate(many, window=(99.9, 100.0))[1])
    assert "step_rate" not in _kinds(_validate(many, window=(99.0, 200.0))[1])


def test_forged_counters_and_markers_are_flagged() -> None:
    recs = _honest()
    recs[4]["t"] = list(reversed(recs[4]["t"]))
    assert "time_order" in _kinds(_validate(recs)[1])
    recs = _honest()
    recs[4]["samples"][-1] = 10 ** 6  # a throughput no DataLoader delivered
    assert "samples" in _kinds(_validate(recs)[1])
    recs = _honest()
    recs.append(dict(recs[-1]))
    assert "finished_twice" in _kinds(_validate(recs)[1])
    recs = _honest()
    recs[-1]["steps"] = 99
    assert "step_count" in _kinds(_validate(recs)[1])
    assert "seal_count" in _kinds(_validate(_honest(), sealed=3)[1])  # bytes written past the harness
    assert "no_seal" in _kinds(_validate(_honest(), sealed=None)[1])
    assert "after_seal" in _kinds(_validate(_honest(), after_seal=2)[1])
    recs = _honest()
    recs.insert(4, dict(recs[3]))  # the same epoch twice
    assert "epoch_order" in _kinds(_validate(recs)[1])


@pytest.mark.parametrize("field,value", [("t", ["1.0"] * 10), ("t", [math.inf] * 10), ("samples", [-1] * 10),
                                         ("backwards", [True] * 10), ("t", [0.0] * 5000)])
def test_records_out_of_schema_are_dropped_and_flagged(field: str, value) -> None:
    recs = _honest()
    recs[4][field] = value
    good, events = _validate(recs)
    assert "schema" in _kinds(events) and not any(r["type"] == "steps" for r in good)


@pytest.mark.parametrize("counts, ok", [([12, 0, 3], True), ([1, 2], False), ([True, 0, 0], False), ([-1, 0, 0], False),
                                        (["1", 0, 0], False)])
def test_batchnorm_counts_fit_their_schema(counts, ok: bool) -> None:
    """What the BatchNorm layers normalised with in training (ddp.syncbn) is three counts, or the record is dropped."""
    recs = _honest()
    recs.insert(5, {"type": "bn_calls", "counts": counts})
    good, events = _validate(recs)
    assert ("schema" not in _kinds(events)) == ok and any(r["type"] == "bn_calls" for r in good) == ok


@pytest.mark.parametrize("field,value", [("runqueue", ["x"] * 10), ("cpu", [math.nan] * 10),
                                         ("data_wait", [None] * 10), ("hand_reduced", [1.0] * 3)])
def test_per_step_readings_are_checked_when_present(field: str, value) -> None:
    """The host readings the speed check trusts (run queue, CPU, data wait, hand all-reduce) fit a schema too."""
    recs = _honest()
    n = len(recs[4]["t"])
    recs[4].update(runqueue=[None] * n, cpu=[0.1] * n, data_wait=[0.0] * n, hand_reduced=[0.0] * n)
    assert not _kinds(_validate(recs)[1])  # honest readings (None where the host has none) pass
    recs[4][field] = value
    good, events = _validate(recs)
    if field == "hand_reduced":  # the right type, the wrong length: the columns disagree
        assert "steps_shape" in _kinds(events)
    else:
        assert "schema" in _kinds(events) and not any(r["type"] == "steps" for r in good)


@pytest.mark.parametrize("value, ok", [([0, 3, 7], True), ([], True), (list(range(65)), False), (["3"], False),
                                       ([-1], False)])
def test_the_steps_of_prints_are_bounded(value, ok: bool) -> None:
    """``at_steps`` (the optimizer step of each print, io.rank0_only) is at most 64 non-negative ints."""
    recs = _honest()
    recs[5]["at_steps"] = value
    good, events = _validate(recs)
    assert ("schema" not in _kinds(events)) == ok
    assert any(r["type"] == "prints" for r in good) == ok


def test_odd_student_values_are_data_not_events() -> None:
    recs = _honest()
    recs[2]["lr"] = ["warmup-cosine" * 100, None, 0.5]
    recs.insert(0, {"type": "epoch", "oversize": 10 ** 9})  # the harness could not send it whole
    recs.insert(0, {"type": "fsdp_mem", "peak": 1})  # a type this grader does not know: passed on
    good, events = _validate(recs)
    assert events == []
    opt = next(r for r in good if r["type"] == "optimizer")
    assert len(opt["lr"][0]) <= 40 and opt["lr"][1:] == [None, 0.5]
    assert any(r["type"] == "fsdp_mem" for r in good) and not any(r.get("oversize") for r in good)


def test_hello_must_match_torchrun() -> None:
    assert integrity.check_hello(1, {"rank": 1, "world": 2}, 2) == []
    assert _kinds(integrity.check_hello(1, {"rank": 0, "world": 8}, 2)) == {"rank", "world_size"}


def test_event_text_is_escaped_and_short() -> None:
    ev = integrity.event("channel", "x", "\u202e<script>" + "A" * 5000)
    assert len(ev["detail"]) <= integrity.MAX_DETAIL and "\u202e" not in ev["detail"]


# -- the channel ------------------------------------------------------------------------------------

@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torchrun, "HELLO_SECONDS", 0.5)
    s = ChannelServer(tmp_path / "chan", 2)
    yield s
    s.sock.close()


def _connect(server: ChannelServer) -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(str(server.dir / "sock"))
    return c


def test_channel_caps_connections_and_drops_those_without_hello(server: ChannelServer) -> None:
    conns = [_connect(server) for _ in range(40)]
    for c in conns:
        try:
            c.sendall(b"x" * 8192)  # no newline: no hello within 4 KiB
        except OSError:
            pass
    time.sleep(1.0)
    server.close()
    for c in conns:
        c.close()
    assert server.counts["refused"] == 40 - (2 + torchrun.EXTRA_CONNECTIONS)
    assert server.counts["no_hello"] == 2 + torchrun.EXTRA_CONNECTIONS
    assert server.streams == {} and {e["kind"] for e in server.events} >= {"refused", "no_hello"}


def test_unknown_hellos_are_counted_not_quoted(server: ChannelServer) -> None:
    for i in range(5):
        c = _connect(server)
        c.sendall(json.dumps({"type": "hello", "token": "\u202e" + "A" * 3000 + str(i)}).encode() + b"\n")
        c.close()
    time.sleep(0.5)
    server.close()
    assert server.counts["unknown_token"] == 5
    said = " ".join(server.tampering) + json.dumps(server.events)
    assert len(said) < 2000 and "A" * 100 not in said and "\u202e" not in said


def _send_stream(server: ChannelServer, records: list[dict], *, inject: list[dict] = (), mac_key: str | None = None,
                 count: int | None = None) -> None:
    """What a rank's harness sends: hello, records, a seal whose MAC covers the harness's own lines."""
    import hmac as _hmac
    token = next(t for t, r in server.tokens.items() if r == 0)
    mac = _hmac.new((mac_key if mac_key is not None else token).encode(), digestmod="sha256")
    c = _connect(server)
    c.sendall(json.dumps({"type": "hello", "token": token, "rank": 0, "world": 2}).encode() + b"\n")
    for r in records:
        data = json.dumps(r).encode() + b"\n"
        mac.update(data)
        c.sendall(data)
    for r in inject:  # written to the descriptor behind the harness's back
        c.sendall(json.dumps(r).encode() + b"\n")
    seal = {"type": "seal", "records": len(records) + len(inject) if count is None else count, "mac": mac.hexdigest()}
    c.sendall(json.dumps(seal).encode() + b"\n")
    c.close()
    time.sleep(0.3)
    server.close()


def test_a_valid_stream_is_read_sealed_and_validated(server: ChannelServer) -> None:
    recs = _honest(t0=time.monotonic())
    _send_stream(server, recs, count=len(recs))
    stream = server.streams[0]
    assert stream.sealed == len(recs) == stream.lines and stream.seal_ok
    events = torchrun.validate(server, 2, (time.monotonic() - 10, time.monotonic()))
    assert events == [] and len(stream.records) == len(recs)


def test_records_written_behind_the_harness_break_the_seal(server: ChannelServer) -> None:
    recs = _honest(t0=time.monotonic())
    _send_stream(server, recs[:3], inject=recs[3:])  # even with the count made to match
    events = torchrun.validate(server, 2, (time.monotonic() - 10, time.monotonic()))
    assert "seal_mac" in _kinds(events)


def test_a_stream_without_the_audit_hook_is_not_trusted(server: ChannelServer) -> None:
    recs = [r for r in _honest(t0=time.monotonic()) if r["type"] != "audit"]
    _send_stream(server, recs)
    assert "audit_missing" in _kinds(torchrun.validate(server, 2, (time.monotonic() - 10, time.monotonic())))


def test_a_seal_made_without_the_token_is_flagged(server: ChannelServer) -> None:
    recs = _honest(t0=time.monotonic())
    _send_stream(server, recs, mac_key="guessed", count=len(recs))
    assert "seal_mac" in _kinds(torchrun.validate(server, 2, (time.monotonic() - 10, time.monotonic())))


# -- report -----------------------------------------------------------------------------------------

def _report(points: float = 10.0) -> GradeReport:
    r = GradeReport(assignment="ddp_speedup", summary=text("好", "good"))
    r.add(CheckResult(id="a", title=text("a", "a"), status=CheckStatus.PASS, points=points, max_points=10.0))
    return r


def test_needs_review_counts_zero_and_keeps_the_computed_grade() -> None:
    r = _report()
    r.mark_for_review([integrity.event("static", "scan", "train.py:1: import gc")])
    d = json.loads(r.to_json())
    assert (d["status"], d["score"], d["max_score"]) == ("needs_review", 0.0, 10.0)
    assert d["integrity"]["computed_score"] == 10.0 and d["integrity"]["events"][0]["kind"] == "scan"
    assert "gc" not in json.dumps(d["summary"])  # the student's sentence names no detection detail
    back = GradeReport.from_dict(d)
    assert back.status == ReportStatus.NEEDS_REVIEW and back.score == 0.0 and back.computed_score == 10.0


def test_the_report_is_capped_at_256_kib() -> None:
    r = _report()
    r.logs = {f"n2.rank{i}": "x" * 400_000 for i in range(3)}
    r.checks[0].evidence = {"tampering": ["y" * 100_000] * 20}
    r.plots = {"loss": {"n2.rank0": [1.0] * 100_000}}
    out = r.to_json()
    assert len(out.encode()) <= 256 * 1024
    d = json.loads(out)
    assert d["score"] == 10.0 and "logs" in d["truncated"] and d["checks"][0]["id"] == "a"
    r.staff_traceback = "t" * 300_000
    r.mark_for_review([integrity.event("records", "schema", "z" * 300)] * 80)
    d = json.loads(r.to_json())
    assert len(json.dumps(d, ensure_ascii=False).encode()) <= 256 * 1024
    assert d["integrity"]["computed_score"] == 10.0 and d["integrity"]["events"]  # what the review needs stays


# -- check isolation ---------------------------------------------------------------------------------

def test_one_check_raising_is_that_checks_error_and_staff_get_the_traceback() -> None:
    iso = checks_runner.isolated(ddp)
    f = iso.check_disjoint(object())  # not a run: the check raises
    assert f.status == CheckStatus.ERROR
    ccfg = {"title": text("t", "t"), "points": 15, "messages": {"ok": {"zh": "好", "en": "ok"}}}
    res = checks_runner.render(lambda *a: pytest.fail("not rendered"), ccfg, "sampler.disjoint", f)
    assert (res.status, res.points, res.max_points) == (CheckStatus.ERROR, 0.0, 15.0)
    report = GradeReport(assignment="x")
    report.add(res)
    checks_runner.move_tracebacks(report)
    assert "Traceback" in report.staff_traceback and checks_runner.STAFF_KEY not in report.checks[0].evidence


def test_run_check_isolates_a_registered_check() -> None:
    def boom(ctx):
        raise KeyError("lr")
    f = checks_runner.run_check(boom, None)
    assert f.status == CheckStatus.ERROR and "KeyError" in f.evidence[checks_runner.STAFF_KEY]
    assert checks_runner.run_check(lambda ctx: 7, None) == 7


def test_a_renderer_crash_on_student_values_is_isolated() -> None:
    ccfg = {"title": text("t", "t"), "points": 0, "messages": {"info": {"zh": "{lr1:g}", "en": "{lr1:g}"}}}
    from graders.checks.render import render as _result
    # the one renderer fills templates with student values without raising ...
    ok = checks_runner.render(_result, ccfg, "batch.global", ddp.Finding(CheckStatus.INFO, "info", {"lr1": "abc"}))
    assert ok.status == CheckStatus.INFO

    def crashing(ccfg, check_id, finding):  # ... and any renderer that does raise costs only its check
        return "{lr1:g}".format(**finding.params)
    res = checks_runner.render(crashing, ccfg, "batch.global", ddp.Finding(CheckStatus.INFO, "info", {"lr1": "abc"}))
    assert res.status == CheckStatus.ERROR and res.points == 0


def test_batch_info_shows_a_non_numeric_lr_as_data() -> None:
    run = _fake_run()
    run.ranks[0].records.insert(0, {"type": "optimizer", "class": "X", "lr": ["cosine"]})
    f = ddp.batch_info(run, run)
    assert f.params["lr1"] == "cosine" and f.evidence["lr_1"] == "cosine"  # text, never a format argument


def _fake_run(dataset_len: int = 80) -> TorchrunRun:
    ranks = {}
    for r in range(2):
        s = RankStream(r)
        s.records = [rec for rec in _honest(rank=r, n=80) if rec["type"] != "optimizer"]
        s.records[2]["dataset_len"] = dataset_len
        s.records.insert(0, {"type": "process_group", "world": 2})
        ranks[r] = s
    return TorchrunRun(nproc=2, result=SandboxResult(returncode=0, timed_out=False, wall_s=1.0), ranks=ranks,
                       stacks={}, logs={}, tampering=[])


def test_coverage_never_materialises_a_huge_len() -> None:
    start = time.process_time()
    f = ddp.check_coverage(_fake_run(dataset_len=10 ** 12))
    assert f.status == CheckStatus.FAIL and time.process_time() - start < 1.0
    assert ddp.check_coverage(_fake_run()).status == CheckStatus.PASS


def test_a_stream_over_its_byte_cap_is_cut_and_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchrun, "MAX_STREAM_BYTES", 64 * 1024)
    server = ChannelServer(tmp_path / "chan", 1)
    token = next(iter(server.tokens))
    c = _connect(server)
    c.sendall(json.dumps({"type": "hello", "token": token, "rank": 0, "world": 1}).encode() + b"\n")
    line = json.dumps({"type": "prints", "count": 0, "logging": 0, "tail": ["x" * 300]}).encode() + b"\n"
    try:
        for _ in range(2000):  # ~700 KiB
            c.sendall(line)
    except OSError:
        pass  # the grader stopped reading and closed
    c.close()
    time.sleep(0.3)
    server.close()
    assert server.streams[0].truncated and len(server.streams[0].records) < 300
    assert "stream_bytes" in {e["kind"] for e in server.events}


def test_finalize_applies_job_events_and_the_static_scan(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nprint('hi')\n")
    r = _report()
    r.checks[0].evidence = {checks_runner.STAFF_KEY: "Traceback: boom"}
    integrity.finalize(r, tmp_path, [clean])
    assert r.status == ReportStatus.GRADED and r.score == 10.0 and r.staff_traceback.endswith("Traceback: boom")
    assert checks_runner.STAFF_KEY not in r.checks[0].evidence

    integrity.append_events(tmp_path, [integrity.event("channel", "refused", "9 connection(s) over the limit")], "n2")
    r = _report()
    integrity.finalize(r, tmp_path, [clean])
    assert r.status == ReportStatus.NEEDS_REVIEW and r.integrity["events"][0]["run"] == "n2"

    sneaky = tmp_path / "sneaky" / "train.py"
    sneaky.parent.mkdir()
    sneaky.write_text("import gc\ngc.get_objects()\n")
    r = _report()
    integrity.finalize(r, sneaky.parent, [sneaky])
    assert r.status == ReportStatus.NEEDS_REVIEW and r.score == 0.0 and r.integrity["computed_score"] == 10.0
