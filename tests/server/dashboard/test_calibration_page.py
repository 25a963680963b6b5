"""The instructor's calibration page: the accepted reference, whether
this host grades speed and why not, and the history with why pairs and attempts were rejected, in both
languages. Read from a real calibration state file; nothing is measured."""
from __future__ import annotations

import time

from graders.ddp_speedup import calibration


def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "calvar"))
    now = time.time()
    pairs = [{"t1": 600.0, "tn": 606.0, "speedup": 1.01, "at": now}] * 3
    history = [
        {"at": now - 300, "outcome": "yielded", "pairs": pairs[:1], "discarded": [], "took_s": 40},
        {"at": now - 200, "outcome": "rejected", "code": "spread", "pairs": pairs[:2], "took_s": 200,
         "discarded": [{"at": now, "code": "load", "load": 11.2, "limit": 5.0, "speedup": 0.61}]},
        {"at": now - 100, "outcome": "accepted", "code": "ok", "reason": "first", "speedup": 1.01, "pairs": pairs,
         "discarded": [], "took_s": 180},
    ]
    calibration.save_state("ddp_speedup", "cpu", {"key": {}, "history": history, "rejected": [],
                                                  "accepted": {"t1": 600.0, "tn": 606.0, "speedup": 1.01, "at": now}})


def test_staff_see_why_speed_is_not_graded_here_and_why_pairs_were_rejected(app, client, auth, tmp_path, monkeypatch):
    _state(tmp_path, monkeypatch)
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/calibration?lang=en").get_data(as_text=True)
    assert "Speed is not graded on this host: the reference solution reaches only 1.01x here" in en
    assert "a pair was discarded: load average 11.2 above 5.0" in en
    assert "gave way to a grading" in en and "the pairs did not agree closely enough" in en
    zh = client.get("/dashboard/DIST101/calibration?lang=zh_CN").get_data(as_text=True)
    assert "本机不评判速度" in zh and "负载均值 11.2 高于 5.0" in zh and "为评分让出主机" in zh


def test_no_calibration_yet_says_gradings_are_pending(app, client, auth, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "empty"))
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/calibration?lang=en").get_data(as_text=True)
    assert 'none accepted yet: gradings are "pending calibration"' in en.replace("&#34;", '"')
    assert "No calibration has run on this host yet." in en


def _recorded(tmp_path, monkeypatch, name, mode):
    import json
    from pathlib import Path

    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "recorded"))
    state = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "calibration" / f"{name}.json").read_text())
    calibration.save_state("ddp_speedup", mode, state)


def test_a_gpu_pair_page_says_speed_is_graded_and_why_the_bar_is_what_it_is(app, client, auth, tmp_path, monkeypatch):
    _recorded(tmp_path, monkeypatch, "gpu_pcie_pair", "gpu")
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/calibration?lang=en").get_data(as_text=True).replace("&#39;", "'")
    gpu = en[en.index("· GPU"):]
    assert "This host grades speed." in gpu and "Speed is not graded" not in gpu
    assert "Why 1.28x: the reference's pair ratios on this host vary by 1.4% (5 pairs)" in gpu
    zh = client.get("/dashboard/DIST101/calibration?lang=zh_CN").get_data(as_text=True)
    assert "为什么是 1.28x" in zh and "1.4%" in zh


def test_a_busy_cpu_page_says_speed_is_not_graded_and_why(app, client, auth, tmp_path, monkeypatch):
    _recorded(tmp_path, monkeypatch, "cpu_busy_2core", "cpu")
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/calibration?lang=en").get_data(as_text=True).replace("&#39;", "'")
    assert "Speed is not graded on this host: the reference solution reaches only 0.61x here, below the 1.45x" in en
    assert "Why 1.45x: the reference's pair ratios on this host vary by 10.7% (7 pairs)" in en


def _stuck(tmp_path, monkeypatch):
    """A busy host: nothing accepted, the last attempt rejected, pairs discarded for load and for
    reference runs that measured nothing (one timed out)."""
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path / "stuck"))
    now = time.time()
    discarded = [{"at": now, "code": "load", "load": 6.0, "limit": 5.0, "speedup": 0.7},
                 {"at": now, "code": "no_throughput", "load": 6.4,
                  "runs": {"1": {"steps": [40], "timed_out": False, "returncode": 0},
                           "2": {"steps": [3, 3], "timed_out": True, "returncode": -9, "wall_s": 150.0}}}]
    history = [{"at": now - 60, "outcome": "rejected", "code": "spread", "pairs": [], "took_s": 600,
                "discarded": discarded}]
    calibration.save_state("ddp_speedup", "cpu", {"key": {}, "history": history, "rejected": [], "accepted": None,
                                                  "running_since": now - 5})


def test_a_stuck_calibration_says_why_what_to_do_and_offers_a_retry(app, client, auth, tmp_path, monkeypatch):
    """A busy host ended every attempt "rejected" with "load average 6.0 above 5.0" and "no throughput
    could be measured", and nothing said what to do; the queue page showed the measuring worker idle."""
    _stuck(tmp_path, monkeypatch)
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/calibration?lang=en").get_data(as_text=True)
    assert "the 2-process run hit its 150 s time limit after 3 steps" in en  # why nothing was measured
    assert "at most 5.0" in en and "Measure again now" in en  # what load is acceptable, and a retry
    zh = client.get("/dashboard/DIST101/calibration?lang=zh_CN").get_data(as_text=True)
    assert "不超过 5.0" in zh and "立即重新测量" in zh and "150 秒" in zh
    resp = client.post("/dashboard/DIST101/calibration/retry?lang=en", data={"assignment": "ddp_speedup", "mode": "cpu"},
                       follow_redirects=True)
    assert resp.status_code == 200 and "A new measurement was requested" in resp.get_data(as_text=True)
    from coursework import calibration_state

    assert calibration_state.retry_requested("ddp_speedup", "cpu")
    queue = client.get("/dashboard/DIST101/queue?lang=en").get_data(as_text=True)
    assert "is measuring the reference solution" in queue
