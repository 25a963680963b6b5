"""A grading held for an integrity review, on every page that shows it.

The student sees "under review" instead of a bare 0 (report, submission list, homework list); the
gradebook marks the cell and leaves it out of the class mean and the homework's score statistics;
the staff integrity page names each event's source and the line of the upload that raised it.
Both languages. The worker's real ``store_report`` path stores the held report.
"""
from __future__ import annotations

import copy
import re

from server.dashboard import stats
from server.scores.gradebook import build_gradebook
from server.extensions import db
from server.models import Course
from tests.server.conftest import PLACEHOLDER, SAMPLE_REPORT

TEACHER = ("teacher", "teacher-pass")
SCRIPT = b"import torch\n\ncells = torch.autograd.backward.__closure__\nprint(cells)\n"


def _held(app, make_sub, username: str = "alice") -> int:
    from server.grading.lifecycle import claim, store_report

    report = copy.deepcopy(SAMPLE_REPORT)
    report.update(status="needs_review", score=0.0,
                  integrity={"computed_score": 9.0, "events": [
                      {"source": "static", "kind": "scan", "rank": None,
                       "detail": "train.py:3: .__closure__ (closure introspection)"},
                      {"source": "harness", "kind": "stream.entry", "rank": 1, "run": "n2",
                       "detail": "the observer's own methods called by the script at train.py:4"},
                      {"source": "records", "kind": "seal_mac", "rank": 0, "detail": "the stream's seal does not match"}]})
    sid = make_sub(username, status="queued", content=SCRIPT)
    with app.app_context():
        token = claim(sid)
        assert store_report(sid, token, report) == "graded"
    return sid


def test_the_student_sees_under_review_not_a_bare_zero(app, client, auth, make_sub, hw):
    sid = _held(app, make_sub)
    auth.login("alice", "alice-pass")
    for lang, word in (("en", "Under review"), ("zh_CN", "复核中")):
        report = client.get(f"/submissions/{sid}/report?lang={lang}").get_data(as_text=True)
        assert word in report and 'class="score-num"' not in report  # no big 0
        assert "closure" not in report and "train.py:3" not in report  # no detection detail for students
        listing = client.get(f"/homework/DIST101/{PLACEHOLDER}?lang={lang}").get_data(as_text=True)
        row = listing[listing.index(f"#{sid}</a>"):]
        row = row[:row.index("</tr>")]
        assert word.lower() in row.lower() and "0 / 10" not in row
        overview = client.get(f"/homework/?lang={lang}").get_data(as_text=True)
        assert ("under review: not final" if lang == "en" else "正在复核") in overview


def test_the_gradebook_marks_the_cell_and_leaves_it_out_of_the_means(app, client, auth, make_sub, hw):
    _held(app, make_sub, "alice")
    make_sub("bob", score=8.0, max_score=10.0)
    with app.app_context():
        course = db.session.get(Course, 1)
        book = build_gradebook(course)
        key = f"hw:{PLACEHOLDER}"
        cells = {r.username: r.cells.get(key) for r in book.rows}
        assert cells["alice"].review and cells["alice"].score == 0.0 and not cells["bob"].review
        assert book.item_mean(key) == 8.0 == book.item_means()[key]  # not (0 + 8) / 2
        assert stats.homework_stats(1, PLACEHOLDER).scores == [0.8]
    auth.login(*TEACHER)
    for lang, word, note in (("en", "under review", "without submissions under review"),
                             ("zh_CN", "复核中", "不含复核中的提交")):
        page = client.get(f"/dashboard/DIST101/?lang={lang}").get_data(as_text=True)
        assert word in page and note in page
        assert re.search(r"<tfoot>.*?>8</td>", page, re.S), "the class mean is bob's 8 alone"
        student = client.get(f"/dashboard/DIST101/students/alice?lang={lang}").get_data(as_text=True)
        assert word in student


def test_the_staff_page_names_each_event_and_its_line(app, client, auth, make_sub, hw):
    _held(app, make_sub)
    auth.login(*TEACHER)
    page = client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True)
    assert "in the upload (static scan)" in page and "in the run (audit hook)" in page
    assert "cells = torch.autograd.backward.__closure__" in page  # line 3, the scan's
    assert "print(cells)" in page  # line 4, the audit hook's "at train.py:4"
    assert page.count("none named") == 1  # the seal event names no line
    zh = client.get("/dashboard/DIST101/integrity?lang=zh_CN").get_data(as_text=True)
    assert "上传文件（静态扫描）" in zh and "上传文件中的行" in zh
