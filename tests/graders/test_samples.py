"""Every ``assignments/*/samples/*`` folder through the real CLI, checked against its expected.json.

expected.json: ``status``; ``checks`` (id -> required status); optional ``min_score`` /
``max_score``; ``message_contains`` (id -> lowercase substrings of the English message);
``limits`` (sandbox limit overrides, passed as ``DISTGRADE_LIMITS``); ``notes``; ``out_of`` (the report's
``max_score``: always the assignment's total); ``summary_contains`` (lowercase substrings of the English summary). ``"status": "rejected"``
means the upload must be refused (exit 3, no attempt used); ``message_contains.rejected`` checks stderr.
Samples run one at a time (graders already use every core) in fast mode.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted(p for p in ROOT.glob("assignments/*/samples/*") if (p / "expected.json").is_file())


def _submission(folder: Path) -> Path:
    files = sorted(p for p in folder.iterdir() if p.name != "expected.json" and p.is_file())
    return files[0] if len(files) == 1 else folder


@pytest.mark.slow
@pytest.mark.parametrize("folder", SAMPLES, ids=[f"{p.parent.parent.name}/{p.name}" for p in SAMPLES])
def test_sample(folder: Path, tmp_path: Path) -> None:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    assignment = folder.parent.parent.name
    env = {**os.environ, "DISTGRADE_FAST": "1", "DISTGRADE_LIMITS": json.dumps(expected.get("limits", {})),
           "DISTGRADE_VAR_DIR": str(tmp_path / "var")}
    env.pop("DISTGRADE_PROGRESS_FILE", None)
    proc = subprocess.run([sys.executable, "-m", "graders", "grade", assignment, str(_submission(folder)), "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if expected.get("status") == "rejected":  # refused before grading: exit 3, reason on stderr, no report
        assert proc.returncode == 3 and not proc.stdout.strip(), f"not rejected: {proc.stdout[-2000:]}"
        for part in expected.get("message_contains", {}).get("rejected", []):
            assert part in proc.stderr.lower(), f"{part!r} not in {proc.stderr!r}"
        return
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be exactly one JSON report:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    report = json.loads(lines[0])
    assert report["status"] == expected.get("status", "graded"), report.get("staff_traceback")
    checks = {c["id"]: c for c in report["checks"]}
    for check_id, status in expected.get("checks", {}).items():
        assert check_id in checks, f"no check {check_id}"
        got = checks[check_id]
        assert got["status"] == status, f"{check_id}: {got['status']} != {status}: {got['message']['en']}"
    for check_id, parts in expected.get("message_contains", {}).items():
        message = checks[check_id]["message"]["en"].lower()
        for part in parts:
            assert part in message, f"{check_id}: {part!r} not in {message!r}"
    if "min_score" in expected:
        assert report["score"] >= expected["min_score"]
    if "max_score" in expected:
        assert report["score"] <= expected["max_score"], report["score"]
    if "out_of" in expected:
        assert report["max_score"] == expected["out_of"], f"scored out of {report['max_score']}"
    for part in expected.get("summary_contains", []):
        assert part in report["summary"]["en"].lower(), f"{part!r} not in {report['summary']['en']!r}"
