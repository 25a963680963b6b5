"""The speed check tells one story: one pair of throughputs, one ratio, the median explained.

A report said "measured 0.80x (1897 -> 1386 samples/s)" (1386 / 1897 = 0.73: the median ratio
beside the medians of each column, from different pairs), drew 1,934 vs 1,089 (the first pair),
listed three throughput pairs in the evidence, labelled "ratios" as "其他数值（ratios）" and
showed the chapter's English expectation on the Chinese page. The report here comes from the
real speed finding and renderer, on the real report page.
"""
from __future__ import annotations

import re

import pytest

from coursework.assignments import load
from graders.ddp_speedup import grader as ddp_speedup
from graders.checks import render
from tests.server.ui_seed import ddp_report

# three pairs whose middle ratio (1.70) is not the ratio of the column medians (3060 / 1897 = 1.61)
PAIRS = [{"t1": 1934.0, "tn": 2901.0}, {"t1": 1897.0, "tn": 3224.9}, {"t1": 1700.0, "tn": 3060.0}]
REF = {"t1": 1900.0, "tn": 3420.0, "speedup": 1.8, "at": 1764754200.5}


@pytest.fixture(scope="module")
def speed_report() -> dict:
    """Built before the test's fixtures point the assignments folder at the placeholder homework."""
    cfg = dict(load("ddp_speedup").raw)
    ev = {"throughput_1": 1934.0, "throughput_n": 2901.0, "loop_1": 1950.2, "loop_n": 2930.7,
          "unique_fraction": 1.0, "nproc": 2, "idle_1_raw": 0.02}
    finding = ddp_speedup.speed_finding(cfg, PAIRS, REF, ev)
    check = render.render(cfg["checks"]["speedup"], "speedup", finding).to_dict()
    report = ddp_report()
    report["checks"] = [check if c["id"] == "speedup" else c for c in report["checks"]]
    report["plots"]["throughput"] = ddp_speedup.throughput_plot(check["evidence"], 2)
    return report


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_one_pair_one_ratio(speed_report, client, auth, make_sub, lang):
    report = speed_report
    check = next(c for c in report["checks"] if c["id"] == "speedup")
    message = check["message"]["zh" if lang == "zh_CN" else "en"]
    raw, t1, tn = re.search(r"(\d+\.\d+)x ?[（(](\d+) (?:->|→) (\d+)", message).groups()
    assert abs(float(tn) / float(t1) - float(raw)) < 0.006, message  # the pair shown is the ratio shown
    assert [round(v) for v in report["plots"]["throughput"]["samples_per_s"]] == [int(t1), int(tn)]
    sid = make_sub("alice", report_json=report, score=report["score"], max_score=100.0)
    auth.login("alice", "alice-pass")
    page = client.get(f"/submissions/{sid}?lang={lang}").get_data(as_text=True)
    assert "其他数值" not in page and "Ratios" not in page
    assert "1,950" not in page and "2,901" not in page  # no second or third pair of throughputs
    assert "1.50" in page and "1.80" in page  # every pair's ratio is listed
    if lang == "zh_CN":
        assert "GPUs over PCIe" not in page and "约 1.8x" in page
        assert "1.50, " not in page  # a Chinese list takes Chinese commas
