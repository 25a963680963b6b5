"""Speed through the real grader: the reference solution graded in full mode on this
host against a calibration the test writes (the calibration itself is tested in test_calibration.py).

* The issue's 2-core host (reference 1.01x): speed is "not graded on this host", its 10 points move
  as assignment.json says, the report stays out of 100, and no repeated pairs are run.
* A host whose reference reaches 1.6x: speed counts, so the grader runs repeated interleaved pairs
  and scores the median of their ratios; on this CPU host the script measures below 1.0x, which
  earns nothing.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from coursework import assignments
from graders import cli
from graders.ddp_speedup import calibration


FULL_EPOCHS = 4  # the full-mode path (speed judged) with fewer epochs than the shipped 12: CI time


@pytest.fixture
def readable_dir():
    """A folder the sandboxed ranks can read (pytest's tmp_path is private to the test's user)."""
    path = Path(tempfile.mkdtemp(prefix="distgrade-speed-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _seed(monkeypatch, tmp_path, speedup: float, readable: Path) -> dict:
    """Homework 1 as shipped but for its full-mode epochs (an assignments folder of links beside one
    edited assignment.json), with a calibration of ``speedup`` for this host."""
    shipped = assignments.load("ddp_speedup")
    folder = readable / "assignments" / "ddp_speedup"
    folder.mkdir(parents=True)
    folder.parent.chmod(0o755)
    folder.chmod(0o755)
    for entry in shipped.path.iterdir():
        if entry.name != "assignment.json":
            (folder / entry.name).symlink_to(entry)
    raw = json.loads((shipped.path / "assignment.json").read_text(encoding="utf-8"))
    raw["epochs"]["cpu"] = FULL_EPOCHS
    (folder / "assignment.json").write_text(json.dumps(raw), encoding="utf-8")
    (folder / "assignment.json").chmod(0o644)
    monkeypatch.setenv("DISTGRADE_ASSIGNMENTS_DIR", str(folder.parent))
    monkeypatch.setenv("DISTGRADE_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("DISTGRADE_FAST", raising=False)
    monkeypatch.setenv("DISTGRADE_LIMITS", '{"wall_s": 900}')  # full mode on a shared, loaded test host
    a = assignments.load("ddp_speedup")
    assert a.raw["epochs"]["cpu"] == FULL_EPOCHS
    cfg = {**a.raw, "_path": str(a.path), "_id": a.id}
    acc = {"t1": 1000.0, "tn": 1000.0 * speedup, "speedup": speedup, "at": time.time(), "pairs": []}
    calibration.save_state(a.id, "cpu", {"key": calibration.host_key(cfg, "cpu"), "accepted": acc, "rejected": [],
                                         "checked_at": time.time()})
    return cfg


@pytest.mark.slow
def test_a_host_that_cannot_speed_up_does_not_grade_speed(monkeypatch, tmp_path, readable_dir):
    cfg = _seed(monkeypatch, tmp_path, 1.01, readable_dir)
    report = cli.grade("ddp_speedup", str(assignments.load("ddp_speedup").path / "solution" / "train.py"), "cpu")
    by = {c.id: c for c in report.checks}
    assert by["speedup"].evidence["key"] == "host_no_gain" and by["speedup"].max_points == 0
    assert by["speedup"].evidence["points_moved_to"] == cfg["checks"]["speedup"]["not_graded_moves_points_to"]
    assert "not graded on this host" in by["speedup"].message["en"] and "本机无法评判速度" in by["speedup"].message["zh"]
    assert by["sampler.disjoint"].max_points == 20 and report.max_score == 100
    assert report.score == 100, {c.id: (c.status.value, c.points) for c in report.checks}
    assert "speed_pairs_s" not in report.timings  # nothing measured twice where speed does not count


@pytest.mark.slow
def test_where_speed_counts_it_rests_on_repeated_interleaved_pairs(monkeypatch, tmp_path, readable_dir):
    cfg = _seed(monkeypatch, tmp_path, 1.6, readable_dir)
    report = cli.grade("ddp_speedup", str(assignments.load("ddp_speedup").path / "solution" / "train.py"), "cpu")
    speed = report.check("speedup")
    pairs = cfg["checks"]["speedup"]["repeat"]["pairs"]
    assert len(speed.evidence["pairs"]) == pairs and len(speed.evidence["ratios"]) == pairs, speed.evidence
    assert report.timings["speed_pairs_s"] > 0
    raw = speed.evidence["raw"]
    assert raw == pytest.approx(sorted(speed.evidence["ratios"])[pairs // 2], abs=1e-3)  # the median of the ratios
    if raw < 1.0:  # a 2-core host: N processes are no faster; nothing below 1.0x earns points
        assert (speed.status.value, speed.points, speed.evidence["key"]) == ("fail", 0, "below_one")
    assert report.max_score == 100
