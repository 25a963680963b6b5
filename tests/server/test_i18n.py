"""Both languages render everywhere; the choice is remembered for the session and the account."""
from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from server.extensions import db
from server.models import User

TRANSLATIONS = Path(__file__).resolve().parents[2] / "server" / "translations"

PAGES = [  # (path, English text, Chinese text)
    ("/homework/", "Homework", "作业"),
    ("/homework/DIST101/hello_ddp", "Upload and grade", "上传并评分"),
    ("/instructor/DIST101/roster", "Import a CSV roster", "导入 CSV 名单"),
]


@pytest.mark.parametrize("lang, word, html_lang", [("en", "Sign in", 'lang="en"'), ("zh_CN", "登录", 'lang="zh-CN"')])
def test_login_page_in_both_languages(client, lang, word, html_lang):
    page = client.get(f"/login?lang={lang}").get_data(as_text=True)
    assert word in page and html_lang in page
    assert "中文" in page and "English" in page  # the switch is always there


@pytest.mark.parametrize("path, en, zh", PAGES)
def test_pages_in_both_languages(client, auth, hw, path, en, zh):
    auth.login("teacher", "teacher-pass")
    assert en in client.get(path + "?lang=en").get_data(as_text=True)
    assert zh in client.get(path + "?lang=zh_CN").get_data(as_text=True)


@pytest.mark.parametrize("lang, summary, hint, title", [
    ("en", "Almost there.", "Check the sampler.", "Speed-up"),
    ("zh_CN", "还差一点。", "检查采样器。", "加速比"),
])
def test_report_texts_follow_the_locale(client, auth, make_sub, lang, summary, hint, title):
    sid = make_sub()
    auth.login()
    page = client.get(f"/submissions/{sid}?lang={lang}").get_data(as_text=True)
    assert summary in page and hint in page and title in page


def test_default_is_chinese_and_browser_language_is_honoured(client):
    assert "登录" in client.get("/login").get_data(as_text=True)
    assert "Sign in" in client.get("/login", headers={"Accept-Language": "en-US,en;q=0.9"}).get_data(as_text=True)


def test_query_switch_is_remembered_in_the_session(client):
    client.get("/login?lang=en")
    assert "Sign in" in client.get("/login").get_data(as_text=True)


def test_switch_is_stored_on_the_account(app, client, auth):
    auth.login()
    r = client.post("/lang", data={"lang": "en", "next": "/homework/"})
    assert r.status_code == 302 and r.location == "/homework/"
    assert "Homework" in client.get("/homework/").get_data(as_text=True)
    with app.app_context():
        assert db.session.scalar(db.select(User.locale).where(User.username == "alice")) == "en"
    # A fresh browser with no choice of its own gets the account's language after login.
    other = app.test_client()
    other.post("/login", data={"username": "alice", "password": "alice-pass"})
    assert "Sign out" in other.get("/homework/").get_data(as_text=True)


def test_unknown_language_is_ignored(client):
    r = client.post("/lang", data={"lang": "xx", "next": "https://evil.example/"})
    assert r.status_code == 302 and r.location == "/homework/"


def _same(s):
    return tuple(s) if isinstance(s, (list, tuple)) else s


def test_catalog_is_complete_and_compiled():
    """Every message has a Chinese translation and the committed .mo matches the .po."""
    pot = read_po((TRANSLATIONS / "messages.pot").open("rb"))
    po = read_po((TRANSLATIONS / "zh_CN/LC_MESSAGES/messages.po").open("rb"))
    mo = read_mo((TRANSLATIONS / "zh_CN/LC_MESSAGES/messages.mo").open("rb"))
    missing = [m.id for m in pot if m.id and not (po.get(m.id) and po.get(m.id).string)]
    assert not missing, f"untranslated: {missing}"
    fuzzy = [m.id for m in po if m.id and m.fuzzy]
    assert not fuzzy, f"fuzzy: {fuzzy}"
    # (plural entries: the .mo reader gives lists where the .po reader gives tuples)
    stale = [m.id for m in po if m.id and m.string and (mo.get(m.id) is None or _same(mo.get(m.id).string) != _same(m.string))]
    assert not stale, f"run pybabel compile -d server/translations: {stale}"


def test_catalog_covers_every_string_in_the_source():
    """A new _() in code or templates must reach the catalog (see babel.cfg for the commands)."""
    from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir

    keywords = dict(DEFAULT_KEYWORDS, _l=None)
    method_map = [("**.py", "python"), ("templates/**.html", "jinja2")]
    found = {msg[2] if isinstance(msg[2], str) else msg[2][0]
             for msg in extract_from_dir(str(TRANSLATIONS.parent), method_map, keywords=keywords)}
    pot = {m.id if isinstance(m.id, str) else m.id[0] for m in read_po((TRANSLATIONS / "messages.pot").open("rb"))}
    assert not found - pot, f"re-extract (pybabel extract ...): {sorted(found - pot)}"


def test_the_catalog_has_no_placeholder_errors():
    """`pybabel compile` (run by ./distgrade install) exits 1 on any of these, and CI would stop before testing.

    A bare '%' in an English msgid (e.g. '% of the maximum') reads as a placeholder the translation lacks.
    """
    with open(TRANSLATIONS / "zh_CN" / "LC_MESSAGES" / "messages.po", "rb") as f:
        catalog = read_po(f)
    problems = [(message.id, [str(e) for e in errors]) for message, errors in catalog.check()]
    assert not problems


@pytest.mark.parametrize("setting", ["en", "en-US", "en_US"])
def test_default_locale_setting_is_the_language_without_a_browser_choice(app, monkeypatch, setting):
    from server import create_app

    monkeypatch.setenv("DEFAULT_LOCALE", setting)
    keep = ("SQLALCHEMY_DATABASE_URI", "REDIS_URL", "VAR_DIR", "SECRET_KEY")
    english = create_app({"TESTING": True, **{k: app.config[k] for k in keep}}).test_client()
    page = english.get("/login").get_data(as_text=True)
    assert "Sign in" in page and 'lang="en"' in page
    # a browser that asks for Chinese still gets it
    assert "登录" in english.get("/login", headers={"Accept-Language": "zh-CN,zh;q=0.9"}).get_data(as_text=True)


def test_an_unknown_default_locale_is_refused_at_start(monkeypatch):
    from server.config import from_env

    monkeypatch.setenv("DEFAULT_LOCALE", "fr")
    with pytest.raises(ValueError, match="DEFAULT_LOCALE"):
        from_env()
