"""One language per page: every page of both roles, with every report fixture of
``tests.server.ui.pages_seed``, renders in Chinese with no English UI words left and in English
with no Chinese left.

What a person typed (names, reasons, annotations, code, logs) is not UI text: it is marked
``translate="no"`` or sits in ``code``/``pre``/``textarea``, and the seeded data's own strings
are listed below. In Chinese, a Latin word passes when the Chinese texts themselves use it (the
catalogue's translations, the assignments' and quizzes' Chinese texts: "rank", "DDP", "GiB"),
so "Idle", "Kernel" or "REPLACED" fail.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

REPO = Path(__file__).resolve().parents[2]
SKIP_TAGS = {"script", "style", "code", "pre", "textarea", "kbd", "samp", "option"}
VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "source", "col", "area", "base", "embed", "param", "track"}
# What the seed's people typed or named: not the interface's words.
DATA = ["late-day waiver after the cluster outage", "gc used for a leak hunt", "分布式训练入门 / Distributed training 101",
        "SyntaxError", "invalid syntax", "70亿", "每张卡只看自己那份数据，梯度在反向传播时平均。", "DIST101", "train.py", "ds_config.json",
        "distgrade", "English", "sha256", "alice", "bob", "carol", "teacher", "Alice", "Bob", "Carol", "Teacher"]
LATIN = re.compile(r"[A-Za-z][A-Za-z-]+")
TOKEN = re.compile(r"[\w./-]+")  # identifiers (field paths, ids, digests) contain _ . / or digits: not words
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


class _Text(HTMLParser):
    """The visible text of a page, without code, logs, inputs and ``translate="no"`` parts."""

    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, bool]] = []
        self.skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            attrs = dict(attrs)
            for name in ("placeholder", "alt", "title", "aria-label"):
                if attrs.get(name) and not self.skip:
                    self.parts.append(attrs[name])
            return
        a = dict(attrs)
        # code and logs, what people typed (translate="no"), and text meant in another language (lang=...)
        hidden = tag in SKIP_TAGS or a.get("translate") == "no" or (tag != "html" and "lang" in a)
        for name in ("title", "aria-label", "placeholder"):
            if a.get(name) and not (self.skip or hidden):
                self.parts.append(a[name])
        self.stack.append((tag, hidden))
        self.skip += hidden

    def handle_endtag(self, tag):
        while self.stack:
            name, hidden = self.stack.pop()
            self.skip -= hidden
            if name == tag:
                break

    def handle_data(self, data):
        if not self.skip and data.strip():
            self.parts.append(" ".join(data.split()))


def visible_text(html: str) -> list[str]:
    parser = _Text()
    parser.feed(html)
    return parser.parts


def _zh_values(node) -> list[str]:
    if isinstance(node, dict):
        out = [node["zh"]] if isinstance(node.get("zh"), str) else []
        return out + [s for v in node.values() for s in _zh_values(v)]
    if isinstance(node, list):
        return [s for v in node for s in _zh_values(v)]
    return []


@lru_cache(maxsize=1)
def chinese_vocabulary() -> frozenset[str]:
    """Latin words the project's Chinese texts use on purpose (lower case)."""
    texts = [m.string for m in read_po((REPO / "server/translations/zh_CN/LC_MESSAGES/messages.po").open("rb"))
             if isinstance(m.string, str)]
    for f in [*REPO.glob("assignments/*/assignment.json"), *REPO.glob("quizzes/**/*.json")]:
        texts += _zh_values(json.loads(f.read_text(encoding="utf-8")))
    texts += [f.read_text(encoding="utf-8") for f in REPO.glob("assignments/*/README.zh.md")]
    return frozenset(w.lower() for t in texts for w in LATIN.findall(t))


def untranslated(html: str, lang: str) -> list[str]:
    """The pieces of visible text in the wrong language."""
    bad = []
    for piece in visible_text(html):
        for d in DATA:
            piece = piece.replace(d, " ")
        if lang == "en":
            # a word quoted in English text is a mention ("不" is how a Chinese note says "not")
            if CJK.search(re.sub(r'"[^"]*"|“[^”]*”', " ", piece)):
                bad.append(piece)
        else:
            words = [t for t in TOKEN.findall(CJK.sub(" ", piece)) if LATIN.fullmatch(t) and "_" not in t
                     and t.lower() not in chinese_vocabulary()]
            if words:
                bad.append(f"{piece}  <- {words}")
    return bad


@pytest.fixture
def seeded(app, monkeypatch):
    monkeypatch.delenv("DISTGRADE_ASSIGNMENTS_DIR", raising=False)
    from tests.server.ui.pages_seed import seed_pages

    with app.app_context():
        return seed_pages()


STUDENT = {"alice": ["/homework/", "/homework/DIST101/ddp_speedup", "/homework/DIST101/config_annotation",
                     "/homework/DIST101/fsdp_fit", "/submissions/{good}", "/submissions/{syntax}",
                     "/submissions/{fsdp}", "/submissions/{config}", "/quiz/", "/calculator/?params=7B&cards=8",
                     "/password"],
           "bob": ["/homework/", "/submissions/{speed}", "/submissions/{notebook}", "/submissions/{fsdp_card}",
                   "/quiz/attempt/{quiz_attempt}", "/quiz/attempt/{quiz_attempt}/results", "/quiz/ch7_3_graded/",
                   "/quiz/ch7_3_selftest/"],
           "carol": ["/submissions/{held}", "/submissions/{replaced}", "/submissions/{waiting}"]}
TEACHER = ["/dashboard/", "/dashboard/DIST101/", "/dashboard/DIST101/students/alice", "/dashboard/DIST101/students/bob",
           "/dashboard/DIST101/homework/ddp_speedup", "/dashboard/DIST101/homework/config_annotation",
           "/dashboard/DIST101/homework/fsdp_fit", "/dashboard/DIST101/quiz/ch7_3_graded", "/dashboard/DIST101/queue",
           "/dashboard/DIST101/audit", "/dashboard/DIST101/integrity", "/dashboard/DIST101/review/",
           "/dashboard/DIST101/review/annotations", "/dashboard/DIST101/submissions/{notebook}/manual",
           "/dashboard/DIST101/review/ch7_3/selftest_2", "/dashboard/DIST101/quiz/ch7_3_selftest",
           "/submissions/{speed}", "/submissions/{config}", "/submissions/{notebook}", "/submissions/{held}",
           "/instructor/", "/instructor/DIST101/roster", "/instructor/DIST101/ddp_speedup"]


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
def test_every_page_speaks_one_language(app, seeded, lang):
    found = {}
    for user, paths in [*STUDENT.items(), ("teacher", TEACHER)]:
        client = app.test_client()
        client.get(f"/login?lang={lang}")
        client.post("/login", data={"username": user, "password": f"{user}-pass"})
        for path in paths:
            url = path.format(**seeded)
            r = client.get(url, follow_redirects=True)
            assert r.status_code == 200, (user, url, r.status_code)
            bad = untranslated(r.get_data(as_text=True), lang)
            if bad:
                found[f"{user} {url}"] = bad
    anonymous = app.test_client()
    anonymous.get(f"/login?lang={lang}")
    for url, code in (("/login", 200), ("/no/such/page", 404)):
        r = anonymous.get(url)
        assert r.status_code == code, url
        bad = untranslated(r.get_data(as_text=True), lang)
        if bad:
            found[f"anonymous {url}"] = bad
    assert not found, json.dumps(found, ensure_ascii=False, indent=1)


def test_the_checker_sees_english_on_a_chinese_page():
    html = '<main><dt>Normalised uncapped</dt><dd>0.89×</dd><p>每个 rank 的峰值显存</p><code>idle_1</code></main>'
    assert untranslated(html, "zh_CN") == ["Normalised uncapped  <- ['Normalised', 'uncapped']"]
    assert untranslated('<p>Waiting <span translate="no">王小明</span></p><p>等待</p>', "en") == ["等待"]
