"""Reports a student can read: evidence as labelled values with units (whatever keys a grader
adds), titles instead of check ids, named timings, syntax errors as "line 2: invalid syntax"
with the caret, launcher frames and host paths out of the logs, sandbox layers for staff only."""
from __future__ import annotations

import copy
import html
import re

import pytest

from server.homework import readable
from tests.server.conftest import SAMPLE_REPORT
from tests.server.ui_seed import SYNTAX_TB  # one launcher traceback for the unit and browser tests


EVIDENCE = {"peak": 167753436.47, "wall_s": 12.3456, "measured_at": 1764754200.5, "band": "good",
            "digests": {"0": "ab12cd34ef56ab12", "1": "ab12cd34ef56ab12"}, "exit_codes": [0, 0],
            "throughput_n": 812.456, "a_new_field_bytes": 3 * 2 ** 30, "started_at": 1764754100.0,
            "reference": {"speedup": 1.83, "solution": "deadbeefcafe0123"}, "unheard_of": {"deep": {"deeper": {"x": 1}}}}


def test_evidence_is_labelled_values_with_units_and_no_internals():
    items = readable.evidence_items(EVIDENCE, "en")
    flat = {i.label: i.value for i in items}
    assert flat["Peak memory"] == "160 MiB"
    assert flat["Wall time"] == "12.3 s"
    assert flat["Throughput, all processes"] == "812.5 samples/s"
    assert flat["A new field bytes"] == "3.0 GiB"  # an unknown key, rendered from its name
    assert flat["Started at"] == "2025-12-03 09:28 UTC"
    assert flat["Exit code per rank"] == "0, 0"
    text = repr(items)
    for raw in ("band", "good", "ab12cd34", "deadbeef", "167753436", "1764754", "measured"):
        assert raw not in text, raw
    ref = next(i for i in items if i.label == "Reference solution")
    assert [(c.label, c.value) for c in ref.children] == [("Speed-up", "1.83×")]
    staff = {i.label for i in readable.evidence_items(EVIDENCE, "en", staff=True)}
    assert "Data digests per rank" in staff and "Speed band" in staff  # staff still see everything, readably
    zh = {i.label: i.value for i in readable.evidence_items(EVIDENCE, "zh")}
    assert zh["峰值显存"] == "160 MiB" and zh["运行时间"] == "12.3 秒"


@pytest.mark.parametrize("hostile", [{"k" * 5000: "v" * 10 ** 5}, {"x": list(range(10 ** 5))},
                                     {"%s%n{0}": "{__class__}"}, "just a string", [1, 2, 3]])
def test_hostile_evidence_stays_bounded(hostile):
    items = readable.evidence_items(hostile, "en")
    assert len(repr(items)) < 5000


def test_summary_names_checks_by_title():
    checks = [{"id": "sampler.disjoint", "title": {"zh": "各 rank 数据不重叠", "en": "Ranks see disjoint data"}},
              {"id": "io.rank0_only", "title": {"zh": "只在 rank 0 写", "en": "Only rank 0 writes"}}]
    text = readable.titles_for_ids("Score 60/100. To fix: sampler.disjoint, io.rank0_only.", checks, "en")
    assert text == "Score 60/100. To fix: “Ranks see disjoint data”, “Only rank 0 writes”."
    assert "sampler.disjoint" not in readable.titles_for_ids("需要处理：sampler.disjoint。", checks, "zh")


def test_timings_are_named():
    items = readable.timing_items({"total_s": 41.25, "run_n1_s": 12.0, "run_n2_s": 18.31, "epochs": 2}, "en")
    assert [(i.label, i.value) for i in items] == [("Grading took", "41.2 s"), ("Run with 1 process", "12 s"),
                                                  ("Run with 2 processes", "18.3 s"), ("Epochs", "2")]
    assert readable.timing_items({"run_n2_s": 3.0}, "zh")[0].label == "2 个进程的运行"


def test_a_syntax_error_reads_line_and_caret_without_launcher_frames():
    ev = {"exception": {"exc_type": "SyntaxError", "message": "invalid syntax (train.py, line 2)", "line": None,
                        "code": "", "traceback": SYNTAX_TB}}
    p = readable.syntax_problem(ev)
    assert (p.line, p.message, p.code) == (2, "invalid syntax", "model = = Net()")
    assert p.caret.index("^") == p.code.index("= N")
    assert readable.clean_message("Rank 0 raised SyntaxError: invalid syntax (train.py line None: ).") == \
        "Rank 0 raised SyntaxError: invalid syntax."
    log = readable.student_log(SYNTAX_TB)
    assert "runpy" not in log and "launch.py" not in log and "/var/tmp" not in log and "/usr/lib" not in log
    assert 'File "train.py", line 2' in log and "SyntaxError: invalid syntax" in log


def _text(resp) -> str:
    """What a reader sees: scripts and tags dropped."""
    page = re.sub(r"<script.*?</script>", " ", resp.get_data(as_text=True), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_report_page_has_no_raw_ids_timestamps_or_byte_counts(client, auth, make_sub):
    report = copy.deepcopy(SAMPLE_REPORT)
    report["summary"] = {"zh": "需要处理：speedup.ratio。", "en": "To fix: speedup.ratio."}
    report["checks"][1]["evidence"] = EVIDENCE
    report["checks"][0]["status"] = "fail"
    report["checks"][0]["message"] = {"zh": "rank 0 抛出 SyntaxError（train.py 第 None 行：）。",
                                      "en": "Rank 0 raised SyntaxError: invalid syntax (train.py line None: )."}
    report["checks"][0]["evidence"] = {"exception": {"exc_type": "SyntaxError", "message": "invalid syntax",
                                                     "traceback": SYNTAX_TB}}
    report["logs"] = {"n1.rank0": SYNTAX_TB}
    report["timings"] = {"total_s": 41.25, "run_n1_s": 12.0}
    report["sandbox"] = {"layers": ["bwrap", "cgroup-memory"]}
    sid = make_sub(report_json=report)
    auth.login()
    for lang in ("en", "zh_CN"):
        text = _text(client.get(f"/submissions/{sid}?lang={lang}"))
        for raw in ("speedup.ratio", "launch.ranks", "167753436", "1764754", "band", "run_n1_s", "total_s",
                    "cgroup-memory", "/var/tmp", "runpy", "None", "{", "ab12cd34"):
            assert raw not in text, (lang, raw)
        assert ("line 2: invalid syntax" if lang == "en" else "第 2 行：invalid syntax") in text
        assert "model = = Net()" in text
    auth.logout()
    auth.login("teacher", "teacher-pass")
    staff = _text(client.get(f"/submissions/{sid}?lang=en"))
    assert "cgroup-memory" in staff and "speedup.ratio" in staff  # staff see the layers and the ids
