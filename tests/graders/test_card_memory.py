"""Homework 3's card memory read from outside the student's processes.

On a GPU host the harness limits each rank to the simulated card with a per-process memory
fraction and reads torch's allocator statistics, all inside the student's interpreter: a script
can lift the fraction (``set_per_process_memory_fraction(1.0)``) and reset or patch the peak it
reports. The grader reads each card it leased with ``nvidia-smi`` while the job runs; a card that
held clearly more than the simulated capacity fails ``memory.fit`` whatever the harness reported.
Here there is no GPU: a stand-in ``nvidia-smi`` on PATH prints what the real one prints for
``--query-gpu=index,memory.used --format=csv,noheader,nounits``.
"""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from coursework.report import CheckStatus
from graders.fsdp_fit import checks as fsdp
from graders.evidence import cards

from tests.graders.test_fsdp_fit import make_run, mem, render

GiB = 2 ** 30
CAP = 15 * GiB


def _fake_smi(tmp_path: Path, used_mib: dict[int, list[int]]) -> Path:
    """An ``nvidia-smi`` that answers the memory query from a file per call, like a card filling up."""
    state = tmp_path / "calls"
    state.write_text("0")
    series = {i: ",".join(map(str, v)) for i, v in used_mib.items()}
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    lines = "\n".join(f'  echo "{i}, $(echo {s} | cut -d, -f$(( n < {len(used_mib[i])} ? n + 1 : {len(used_mib[i])} )))"'
                      for i, s in series.items())
    script.write_text(f"""#!/bin/bash
case "$*" in *--query-gpu=index,memory.used*) ;; *) exit 9;; esac
n=$(cat {state}); echo $((n + 1)) > {state}
{lines}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script.parent


def test_the_query_parses_the_real_format(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_smi(tmp_path, {0: [612], 1: [16000], 3: [4]})}:{os.environ['PATH']}")
    assert cards.query([0, 3]) == {0: 612 * cards.MiB, 3: 4 * cards.MiB}


def test_no_tool_is_said_not_guessed(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    watch = cards.CardWatch([0])
    watch.stop()
    ev = watch.evidence()
    assert ev["seen"] is False and ev["why"]["zh"] and ev["why"]["en"]


def test_the_watch_keeps_each_cards_peak_above_its_idle_reading(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_smi(tmp_path, {0: [500, 9000, 21000, 8000], 1: [500, 700, 700, 700]})}"
                               f":{os.environ['PATH']}")
    monkeypatch.setattr(cards, "EVERY_S", 0.05)
    watch = cards.CardWatch([0, 1])
    time.sleep(0.6)
    watch.stop()
    ev = watch.evidence()
    assert ev["seen"] is True
    assert ev["cards"][0]["used_bytes"] == (21000 - 500) * cards.MiB
    assert ev["cards"][1]["used_bytes"] == 200 * cards.MiB


def _with_cards(run, used: dict[int, int]):
    run.evidence = {"cards": {"source": "outside", "seen": True,
                              "cards": {i: {"idle_bytes": 0, "peak_bytes": u, "used_bytes": u} for i, u in used.items()}}}
    return run


def test_a_card_over_the_capacity_fails_fit_whatever_the_harness_said():
    """The harness reported 12 GiB (a lifted fraction and a reset peak); the card held 19 GiB."""
    run = _with_cards(make_run({0: [mem(12 * GiB)], 1: [mem(12 * GiB)]}), {0: 19 * GiB, 1: 12 * GiB})
    f = fsdp.check_fit(run, CAP, "T4")
    assert (f.status, f.key) == (CheckStatus.FAIL, "over_outside")
    msg = render("memory.fit", f)["message"]
    assert fsdp.fmt_bytes(19 * GiB) in msg["en"] and fsdp.fmt_bytes(19 * GiB) in msg["zh"] and f.evidence["outside"]["cards"]


def test_a_card_within_capacity_plus_the_cuda_context_still_fits():
    """nvidia-smi also counts the CUDA context, NCCL buffers and the allocator's cache: a correct
    script near the limit must not fail for them."""
    run = _with_cards(make_run({0: [mem(14 * GiB)], 1: [mem(14 * GiB)]}),
                      {0: CAP + cards.CONTEXT_ALLOWANCE - GiB // 2, 1: 14 * GiB})
    assert fsdp.check_fit(run, CAP, "T4").key == "fits"


def test_no_card_reading_leaves_the_harness_verdict():
    run = make_run({0: [mem(12 * GiB)], 1: [mem(12 * GiB)]})
    run.evidence = {"cards": {"source": "outside", "seen": False, "why": {"zh": "x", "en": "x"}}}
    assert fsdp.check_fit(run, CAP, "T4").key == "fits"
