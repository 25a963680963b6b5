"""What the pages say, in both languages: an attempt being regraded is still an attempt, ids and
enum values become words, one wording per release state, a run stopped early says how far it got,
a practice attempt is not a score of 0, every flash is styled, the Teaching tabs are everywhere a
teacher works, and S on a small review group says why it does nothing.

The data: ``tests.server.ui.narrow_seed`` (real reports' shapes, a real regrade, a real quiz attempt).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.server.ui.narrow_seed import seed_narrow

LANGS = ["zh_CN", "en"]


@pytest.fixture
def ids(app):
    with app.app_context():
        return seed_narrow()


def _get(client, auth, user: str, path: str, lang: str) -> str:
    client.post("/logout")
    auth.login(user, f"{user}-pass")
    r = client.get(path + ("&" if "?" in path else "?") + f"lang={lang}")
    assert r.status_code == 200, (path, r.status_code)
    return r.get_data(as_text=True)


def _text(html: str) -> str:
    """The words a reader sees (no tags, scripts, styles or attribute values)."""
    html = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", html)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _section(html: str, labelled_by: str) -> str:
    m = re.search(rf'(?s)<section[^>]*aria-labelledby="{labelled_by}"[^>]*>(.*?)</section>', html)
    assert m, labelled_by
    return _text(m.group(1))


ATTEMPTS = {"zh_CN": "已用 3 次，共 20 次", "en": "Attempts used: 3 of 20"}


@pytest.mark.parametrize("lang", LANGS)
def test_an_upload_being_regraded_still_counts_and_the_count_is_beside_the_upload(client, auth, ids, lang):
    """During a regrade the count dropped from 3/20 to 2/20 (the regraded upload is queued again),
    and the upload box did not say how many attempts were used."""
    page = _get(client, auth, "bob", "/homework/DIST101/ddp_speedup", lang)
    assert ATTEMPTS[lang] in _section(page, "upload-h")
    assert re.search(r"3 / 20", _text(page.split('class="layout-2"')[0]))
    listing = _get(client, auth, "bob", "/homework/", lang)
    item = re.search(r'(?s)<li class="card hw">(?:(?!</li>).)*?/homework/DIST101/ddp_speedup".*?</li>', listing)
    assert item and "3 / 20" in _text(item.group(0)), item and _text(item.group(0))


def _release(app, item: str, *, publish: bool) -> None:
    from server.scores import release
    from server.extensions import db
    from server.models import User

    with app.app_context():
        teacher = db.session.scalar(db.select(User).where(User.username == "teacher"))
        release.set_mode(1, item, "manual", teacher.id)
        if publish:
            release.publish(1, item, teacher.id)


RAW_IDS = ["ddp_speedup", "config_annotation", "fsdp_fit", "ch7_3_graded", "mode:manual", "sub:", "hw:", "quiz:"]


def test_chinese_teacher_pages_name_things_by_title_not_by_id(app, client, auth, ids):
    """"ch7_3_graded #1", "ddp_speedup #3", "Submissions: ddp_speedup", audit objects like
    "sub:10/integrity" and a release log of "mode:manual" / "publish" on zh pages."""
    _release(app, "hw:ddp_speedup", publish=True)
    for path in ("/instructor/", "/instructor/DIST101/ddp_speedup", "/dashboard/DIST101/students/bob",
                 "/dashboard/DIST101/audit", "/dashboard/DIST101/homework/ddp_speedup"):
        text = _text(_get(client, auth, "teacher", path, "zh_CN"))
        shown = [raw for raw in RAW_IDS if raw in text]
        assert not shown, (path, shown)
        assert not re.search(r"(?<![\w-])publish(?![\w-])", text), path
    assert "作业 1" in _text(_get(client, auth, "teacher", "/instructor/DIST101/ddp_speedup", "zh_CN"))


NOT_RELEASED = {"zh_CN": "未公布", "en": "not released"}


@pytest.mark.parametrize("lang", LANGS)
def test_an_unreleased_result_is_said_one_way_on_every_student_page(app, client, auth, ids, lang):
    """The score column said "graded" for results held back, the report's heading "Graded", the
    lists "Scores not released yet": the score's state is one wording, "not released"."""
    _release(app, "hw:ddp_speedup", publish=False)
    page = _get(client, auth, "bob", "/homework/DIST101/ddp_speedup", lang)
    history = _section(page, "history-h")
    scores = [_text(s).strip().lower() for s in re.findall(r'<td class="num">(.*?)</td>', page, re.S)]
    assert scores.count(NOT_RELEASED[lang]) == 2, scores  # the two graded uploads; the one being regraded waits
    assert {"zh_CN": "已评分", "en": "graded"}[lang] not in scores, history
    report = _text(_get(client, auth, "bob", f"/submissions/{ids['third']}", lang))
    assert NOT_RELEASED[lang] in report.lower(), report[:400]
    listing = _text(_get(client, auth, "bob", "/homework/", lang))
    assert NOT_RELEASED[lang] in listing.lower()


@pytest.mark.parametrize("lang", LANGS)
def test_a_run_stopped_early_shows_what_ran_not_the_configured_epochs(client, auth, ids, lang):
    """"epochs 12" on a run the grader stopped after 25 steps."""
    text = _text(_get(client, auth, "alice", f"/submissions/{ids['stopped']}", lang))
    m = re.search(r"(轮数|Epochs) (\S+)", text)
    assert not (m and m.group(2) == "12"), m.group(0)
    assert {"zh_CN": "提前停止", "en": "stopped early"}[lang] in text.lower()
    assert "25" in text


PRACTICE = {"zh_CN": "练习", "en": "practice"}


@pytest.mark.parametrize("lang", LANGS)
def test_a_practice_attempt_is_practice_not_a_score_of_zero(client, auth, ids, lang):
    """A started practice attempt was listed as "0 / 6" (and as no attempt at all)."""
    page = _get(client, auth, "alice", "/quiz/ch7_3_selftest/", lang)
    rows = re.findall(r"(?s)<tr>\s*<td>(\d+)</td>(.*?)</tr>", page)
    assert len(rows) == 2, rows
    for no, row in rows:
        cells = [_text(c).strip() for c in re.findall(r"(?s)<td>(.*?)</td>", row)]
        assert not cells[-1].startswith("0 /"), (no, cells)
        assert PRACTICE[lang] in cells[-1].lower(), (no, cells)
    teacher = _text(_get(client, auth, "teacher", "/dashboard/DIST101/students/alice", lang))
    assert not re.search(r"#2 · 0 / 6", teacher), teacher
    assert re.search(r"#2 · [^·]*" + PRACTICE[lang], teacher.lower())


def test_every_flash_category_has_a_style():
    """Flashes of the category "ok" (LTI, quiz review requests) had no style at all."""
    root = Path(__file__).resolve().parents[2] / "server"
    used = set()
    for py in root.rglob("*.py"):
        used |= set(re.findall(r"""flash\((?:[^()]|\([^()]*\))*?,\s*["'](\w+)["']\)""", py.read_text()))
    css = (root / "static" / "style.css").read_text()
    assert {"error", "info", "ok"} <= used, used
    assert not [c for c in used if f".flash-{c}" not in css]


@pytest.mark.parametrize("lang", LANGS)
def test_live_log_panes_are_titled_in_words_and_a_silent_rank_has_none(client, auth, ids, lang):
    """Live panes were titled "n2.rank0", and a rank that printed nothing was an empty black box."""
    page = _get(client, auth, "alice", f"/submissions/{ids['running']}", lang)
    logs = re.search(r'(?s)<div id="logs"[^>]*>(.*?)</div>', page).group(1)
    titles = [_text(t).strip() for t in re.findall(r"(?s)<summary>(.*?)</summary>", logs)]
    assert titles == [{"zh_CN": "2 个进程，rank 0", "en": "2 processes, rank 0"}[lang]], titles
    assert "rank_one" in page and "rank_many" in page  # the live pane names ranks the same way


@pytest.mark.parametrize("path", ["/instructor/DIST101/roster", "/instructor/DIST101/ddp_speedup"])
def test_roster_and_all_submissions_keep_the_teaching_tabs(client, auth, ids, path):
    page = _get(client, auth, "teacher", path, "en")
    nav = re.search(r'(?s)<nav class="dash-nav"[^>]*>(.*?)</nav>', page)
    assert nav, path
    assert "Gradebook" in nav.group(1) and "7.3 graded quiz" in nav.group(1)


@pytest.mark.parametrize("lang", LANGS)
def test_the_review_page_says_which_groups_s_settles(app, client, auth, ids, lang):
    """S (settle from a sample) did nothing on a group of 29 or fewer, and nothing said so."""
    from coursework.review_sampling import READ_ALL_UP_TO

    page = _get(client, auth, "teacher", "/dashboard/DIST101/review/ch7_3/selftest_2", lang)
    keys = _text(re.search(r'(?s)<p class="help" id="review-confirm-keys"[^>]*>(.*?)</p>', page).group(1))
    assert str(READ_ALL_UP_TO) in keys, keys
    assert "data-small-group=" in page  # what S says on a group read whole


@pytest.mark.parametrize("lang", LANGS)
def test_homework2_evidence_has_no_unnamed_keys(client, auth, ids, lang):
    """Homework 2's report showed the reading's explanation as "其他数值（reading）" / "Reading"."""
    text = _text(_get(client, auth, "alice", f"/submissions/{ids['config']}", lang))
    assert "其他数值（" not in text and "Reading " not in text, re.findall(r"其他数值（[^）]*）", text)
    assert {"zh_CN": "自动阅读的结论", "en": "What the reading found"}[lang] in text


def test_every_timing_the_graders_write_has_a_chinese_label():
    """"Speed pairs 106.5 秒": the re-measured speed runs' time had no label of its own."""
    from server.homework.readable import timing_items

    timings = {"total_s": 41.2, "epochs": 2, "steps": 30, "run_n1_s": 12.0, "run_n2_s": 18.3,
               "speed_pairs_s": 106.5, "calibration_s": 3.0}
    labels = [i.label for i in timing_items(timings, "zh")]
    assert not [label for label in labels if re.search(r"[A-Za-z]{3,}", label)], labels
