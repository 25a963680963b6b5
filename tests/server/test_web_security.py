"""Nobody signs in without a password, through the Flask test client.

* the session key: generated once into ``var/`` (0600), never the public default, never short;
* ``var/`` is 0700 and the SQLite database 0600;
* quiz variant seeds come from the secret (HMAC), so nobody computes another's answers offline;
* sign-in is throttled per account and per address (Flask-Limiter on the test's real Redis);
* a session ends on logout and on a password change, on every path, fast ones included.

The same attacks against the real service started by the supervisor are in
``tests/ops/test_web_security_service.py``.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from flask.sessions import SecureCookieSessionInterface

from server.commands import demo_accounts
from server.extensions import db
from server.models import User

PUBLIC_DEFAULT = "dev-only-change-me"
REPO = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def forge_cookie(app, secret: str, payload: dict) -> str:
    """A session cookie as someone who knows ``secret`` would sign it (Flask's own serializer)."""
    class _App:  # the serializer only needs the key and the salt settings
        secret_key = secret
        config = {"SECRET_KEY_FALLBACKS": None}
    return SecureCookieSessionInterface().get_signing_serializer(_App()).dumps(payload)


def prod_config(tmp_path: Path, redis_url: str, **over) -> dict:
    """Settings as a deployment has them: not TESTING, so every protection is active."""
    var = tmp_path / "var"
    cfg = {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{var / 'prod.db'}", "REDIS_URL": redis_url,
           "VAR_DIR": str(var), "WTF_CSRF_ENABLED": False}
    cfg.update(over)
    return cfg


# ---------------------------------------------------------------- item 5: secrets


@pytest.mark.parametrize("key", [PUBLIC_DEFAULT, "", "short-key", PUBLIC_DEFAULT + "\n"])
def test_app_refuses_public_default_empty_or_short_key(tmp_path, redis_server, key):
    from server import create_app
    from server.config import InsecureSecretError

    with pytest.raises(InsecureSecretError) as err:
        create_app(prod_config(tmp_path, redis_server.url, SECRET_KEY=key))
    assert "SECRET_KEY" in str(err.value)  # says what to do, not just "no"


def test_app_reads_the_generated_secret_from_var(tmp_path, redis_server):
    from server import create_app
    from server.config import load_or_create_secret

    key = load_or_create_secret(tmp_path / "var")
    app = create_app(prod_config(tmp_path, redis_server.url, SECRET_KEY=None))
    assert app.config["SECRET_KEY"] == key and len(key) >= 32


def test_an_unset_key_is_generated_once_and_shared(tmp_path, redis_server):
    """A process started on a fresh var/ without SECRET_KEY (the CLI, a worker) makes the key there."""
    from server import create_app

    first = create_app(prod_config(tmp_path, redis_server.url, SECRET_KEY=None))
    second = create_app(prod_config(tmp_path, redis_server.url, SECRET_KEY=None))
    key = (tmp_path / "var" / "secret_key").read_text().strip()
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"] == key and len(key) >= 32


def test_secret_file_is_private_atomic_and_reused(tmp_path):
    from server.config import load_or_create_secret

    var = tmp_path / "var"
    first = load_or_create_secret(var)
    path = var / "secret_key"
    assert _mode(var) == 0o700 and _mode(path) == 0o600
    assert load_or_create_secret(var) == first
    assert list(var.iterdir()) == [path]  # no temporary file left beside it


def test_secret_created_once_when_processes_race(tmp_path):
    """Web and worker processes starting together all end up with one and the same key."""
    var = tmp_path / "var"
    # server/config.py alone (not the package, which imports Flask): the race stays a race.
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('cfg', 'server/config.py'); "
            "cfg = importlib.util.module_from_spec(spec); spec.loader.exec_module(cfg); "
            "print(cfg.load_or_create_secret(sys.argv[1]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(var)], cwd=REPO, stdout=subprocess.PIPE, text=True)
             for _ in range(6)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and len(keys.pop()) >= 32


def test_an_existing_var_dir_is_tightened(tmp_path):
    from server.config import ensure_private_dir

    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    os.chmod(var, 0o755)
    ensure_private_dir(var)
    assert _mode(var) == 0o700


def test_a_tampered_secret_file_is_refused(tmp_path):
    """A secret file others can read is no secret: say so instead of using it."""
    from server.config import InsecureSecretError, load_or_create_secret

    var = tmp_path / "var"
    load_or_create_secret(var)
    os.chmod(var / "secret_key", 0o644)
    with pytest.raises(InsecureSecretError):
        load_or_create_secret(var)


def test_var_dir_and_sqlite_database_are_private(tmp_path, redis_server):
    from flask_migrate import upgrade

    from server import create_app

    app = create_app(prod_config(tmp_path, redis_server.url, SECRET_KEY="x" * 40))
    with app.app_context():
        upgrade()
    var = tmp_path / "var"
    assert _mode(var) == 0o700
    assert _mode(var / "prod.db") == 0o600


def test_cookie_signed_with_public_default_is_refused(client, app, make_sub):
    """Even pointing the forgery at the right user id, the public key opens nothing."""
    sid = make_sub("alice")
    forged = forge_cookie(app, PUBLIC_DEFAULT, {"_user_id": "1", "_fresh": True, "_sv": 0})
    client.set_cookie("session", forged)
    assert client.get("/instructor/").status_code == 302
    assert client.get(f"/api/submissions/{sid}").status_code == 401


# ---------------------------------------------------------------- item 5: quiz seeds


def test_quiz_seed_is_derived_from_the_secret(tmp_path, redis_server):
    """Same secret: the same variant for every process; another secret: other variants.

    The seed of the old constant salt (what a student could compute from the public code) must
    not be the one used.
    """
    import hashlib

    from coursework.quiz.seeds import seed_key, variant_seed

    a, b = seed_key("a" * 40), seed_key("b" * 40)
    pairs = [(u, f"q{q}", n) for u in range(1, 6) for q in range(8) for n in (1, 2)]
    assert [variant_seed(*p, key=a, quiz="g") for p in pairs] == [variant_seed(*p, key=a, quiz="g") for p in pairs]
    assert sum(variant_seed(*p, key=a, quiz="g") != variant_seed(*p, key=b, quiz="g") for p in pairs) >= len(pairs) - 1
    # the quiz is part of the seed: a practice attempt never has a graded attempt's variant
    assert sum(variant_seed(*p, key=a, quiz="g") == variant_seed(*p, key=a, quiz="p") for p in pairs) == 0

    def public(student, qid, attempt):  # the old, offline-computable seed
        digest = hashlib.sha256(f"distgrade|{student}|{qid}|{attempt}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
    assert sum(variant_seed(*p, key=a, quiz="g") == public(*p) for p in pairs) == 0
    with pytest.raises(TypeError):
        variant_seed(1, "q", 1, quiz="g")  # no key, no seed: there is no public default any more
    with pytest.raises(TypeError):
        variant_seed(1, "q", 1, key=a)  # no quiz: every quiz would share its variants


def test_app_quiz_seeds_follow_the_app_secret(app, auth, client):
    from server.quiz.attempts import seed_for

    class Att:
        user_id, attempt_no, quiz_id = 2, 1, "ch7_3_graded"
    with app.test_request_context():
        mine = seed_for(Att, "ch7_3/memory/zero_per_card")
    app.config["SECRET_KEY"] = "another-secret-of-enough-length-000"
    from server import apply_secret
    apply_secret(app)
    with app.test_request_context():
        assert seed_for(Att, "ch7_3/memory/zero_per_card") != mine


# ---------------------------------------------------------------- item 6: throttling


def _post_login(client, username, password, addr="10.0.0.1", lang="en"):
    return client.post(f"/login?lang={lang}", data={"username": username, "password": password},
                       environ_base={"REMOTE_ADDR": addr})


def test_sixth_wrong_password_in_a_minute_is_throttled(client):
    for _ in range(5):
        assert _post_login(client, "alice", "wrong").status_code == 401
    r = _post_login(client, "alice", "alice-pass")  # even the right one: the account is on hold
    assert r.status_code == 429
    page = r.get_data(as_text=True)
    assert "Too many attempts" in page and " s." in page
    assert 'name="password"' in page  # the form again, not an error page
    assert client.get("/homework/").status_code == 302  # not signed in


def test_throttle_message_in_chinese(client):
    for _ in range(5):
        _post_login(client, "alice", "wrong", lang="zh_CN")
    page = _post_login(client, "alice", "wrong", lang="zh_CN").get_data(as_text=True)
    assert "尝试次数过多" in page and 'name="password"' in page


def test_throttle_per_account_across_addresses(app, client):
    # the per-account limit (from any address) is the looser LOGIN_LIMIT_ACCOUNT:
    # LOGIN_LIMIT is per account *and* address (tests/server/auth/test_lockout.py)
    for i in range(int(app.config["LOGIN_LIMIT_ACCOUNT"].split()[0])):
        assert _post_login(client, "alice", "wrong", addr=f"10.0.1.{i}").status_code == 401
    assert _post_login(client, "alice", "wrong", addr="10.0.2.1").status_code == 429
    # the account name is normalised: case and spaces do not give a fresh counter
    assert _post_login(client, " ALICE ", "wrong", addr="10.0.2.2").status_code == 429
    assert _post_login(client, "bob", "bob-pass", addr="10.0.2.3").status_code == 302  # others unaffected


def test_throttle_per_address_across_accounts(app, client):
    allowed = int(app.config["LOGIN_LIMIT_ADDRESS"].split()[0])
    for i in range(allowed):
        assert _post_login(client, f"user{i}", "wrong", addr="10.0.3.1").status_code == 401
    assert _post_login(client, "carol", "wrong", addr="10.0.3.1").status_code == 429
    assert _post_login(client, "bob", "bob-pass", addr="10.0.3.2").status_code == 302


def test_a_classroom_behind_one_address_is_not_locked_out(client):
    """A lab's students share one public address: a dozen typos at the start of class lock nobody out."""
    for i in range(12):
        assert _post_login(client, f"student{i}", "typo", addr="10.0.9.9").status_code == 401
    assert _post_login(client, "alice", "alice-pass", addr="10.0.9.9").status_code == 302


def _proxied_app(tmp_path, redis_server, hops: int):
    from flask_migrate import upgrade

    from server import create_app

    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'p.db'}",
                       "REDIS_URL": "", "VAR_DIR": str(tmp_path / "var"), "WTF_CSRF_ENABLED": False,
                       "SECRET_KEY": "test", "TRUSTED_PROXIES": hops, "LOGIN_LIMIT": "2 per minute",
                       "LOGIN_LIMIT_ADDRESS": "2 per minute"})
    with app.app_context():
        upgrade()
    return app


@pytest.mark.parametrize("hops", [0, 1])
def test_forwarded_address_counts_only_behind_a_trusted_proxy(tmp_path, redis_server, hops):
    """Behind a proxy every request comes from the proxy; TRUSTED_PROXIES=1 reads X-Forwarded-For.

    Without it the header is the client's word and is ignored, so it cannot dodge the count.
    """
    app = _proxied_app(tmp_path, redis_server, hops)
    client = app.test_client()
    codes = [client.post("/login", data={"username": f"u{i}", "password": "x"},
                         environ_base={"REMOTE_ADDR": "10.1.1.1"},
                         headers={"X-Forwarded-For": f"192.0.2.{i}"}).status_code for i in range(3)]
    assert codes == ([401, 401, 401] if hops else [401, 401, 429])


def test_session_cookie_is_secure_when_served_over_https(tmp_path, redis_server):
    from server import create_app

    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 's.db'}",
                      "REDIS_URL": "", "VAR_DIR": str(tmp_path / "var"), "SECRET_KEY": "test",
                      "HTTPS": True})
    assert app.config["SESSION_COOKIE_SECURE"] and app.config["REMEMBER_COOKIE_SECURE"]
    assert app.config["PREFERRED_URL_SCHEME"] == "https"


def test_successful_logins_are_not_counted(client, auth):
    for _ in range(8):
        assert _post_login(client, "alice", "alice-pass").status_code == 302
        auth.logout()


def test_throttle_counts_live_in_redis(app, client, redis_server):
    """Shared by every gunicorn process: the counters are in the service's Redis, not in memory."""
    import redis

    assert app.extensions["distgrade_login_storage"].startswith("redis")
    _post_login(client, "alice", "wrong")
    keys = redis.Redis.from_url(redis_server.url).keys("*")
    assert any(b"login" in k for k in keys), keys


@pytest.mark.parametrize("url, uri", [
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("unix:///srv/var/redis.sock", "redis+unix:///srv/var/redis.sock"),  # the embedded Redis of ./distgrade up
    ("rediss://:pw@host:6380/1", "rediss://:pw@host:6380/1"),
])
def test_throttle_storage_is_the_service_redis(url, uri):
    from server.auth.throttle import storage_uri

    assert storage_uri(url) == uri


def test_throttle_survives_redis_going_away(tmp_path):
    """Redis unreachable: sign-in still works and is still throttled (in memory, per process)."""
    from flask_migrate import upgrade

    from server import create_app
    from tests.conftest import free_port

    app = create_app(prod_config(tmp_path, f"redis://127.0.0.1:{free_port()}/0", SECRET_KEY="y" * 40))
    with app.app_context():
        upgrade()
        app.test_cli_runner().invoke(args=["seed-demo"])
    client = app.test_client()
    passwords = demo_accounts(Path(app.config["VAR_DIR"]))  # outside tests each account got its own
    for _ in range(5):
        assert _post_login(client, "alice", "wrong").status_code == 401
    assert _post_login(client, "alice", passwords["alice"]).status_code == 429
    assert _post_login(client, "bob", passwords["bob"], addr="10.9.9.9").status_code == 302


# ---------------------------------------------------------------- item 6: revocation


def _session_cookie(client) -> str:
    return client.get_cookie("session").value


def test_cookie_replayed_after_logout_is_refused_everywhere(app, client, auth, make_sub):
    sid = make_sub("alice")
    auth.login()
    attempt = client.post("/quiz/ch7_3_selftest/start").headers["Location"]
    stolen = _session_cookie(client)
    assert client.get(f"/api/submissions/{sid}").status_code == 200
    auth.logout()
    replay = app.test_client()
    replay.set_cookie("session", stolen)
    assert replay.get("/homework/").status_code == 302  # the user loader
    assert replay.get(f"/api/submissions/{sid}").status_code == 401  # the status API fast path
    assert replay.get(attempt).status_code == 302  # a session_auth quiz page
    assert replay.post(attempt + "/answer/0", data={"answer": "x"}).status_code in (302, 401)


def test_password_change_ends_other_sessions(app, client, auth, make_sub):
    sid = make_sub("alice")
    auth.login()
    assert client.get(f"/api/submissions/{sid}").status_code == 200
    with app.app_context():
        user = db.session.scalar(db.select(User).where(User.username == "alice"))
        user.set_password("a-new-password")
        db.session.commit()
    assert client.get("/homework/").status_code == 302
    assert client.get(f"/api/submissions/{sid}").status_code == 401
    assert auth.login("alice", "a-new-password").status_code == 302
    assert client.get(f"/api/submissions/{sid}").status_code == 200


def test_session_without_version_is_refused(app, client, make_sub):
    """A cookie signed with the right key but minted before versions existed does not count."""
    sid = make_sub("alice")
    with app.app_context():
        uid = db.session.scalar(db.select(User.id).where(User.username == "alice"))
    client.set_cookie("session", forge_cookie(app, app.config["SECRET_KEY"], {"_user_id": str(uid), "_fresh": True}))
    assert client.get("/homework/").status_code == 302
    assert client.get(f"/api/submissions/{sid}").status_code == 401
    client.set_cookie("session", forge_cookie(app, app.config["SECRET_KEY"],
                                              {"_user_id": str(uid), "_fresh": True, "_sv": 0}))
    assert client.get("/homework/").status_code == 200  # the right version is accepted


def test_logout_in_one_browser_leaves_no_stale_fast_path(app, auth, make_sub):
    """Two concurrent clients of one user: logout revokes both, even on a warmed fast path."""
    sid = make_sub("alice")
    a, b = app.test_client(), app.test_client()
    for c in (a, b):
        c.post("/login", data={"username": "alice", "password": "alice-pass"})
        assert c.get(f"/api/submissions/{sid}").status_code == 200
    a.post("/logout")
    assert b.get(f"/api/submissions/{sid}").status_code == 401


def test_password_page_keeps_this_session_and_ends_the_others(app, auth, make_sub):
    sid = make_sub("alice")
    here, elsewhere = app.test_client(), app.test_client()
    for c in (here, elsewhere):
        c.post("/login", data={"username": "alice", "password": "alice-pass"})
    assert "Change password" in here.get("/password?lang=en").get_data(as_text=True)
    assert "修改密码" in here.get("/password?lang=zh_CN").get_data(as_text=True)
    assert 'href="/password"' in here.get("/homework/").get_data(as_text=True)  # reachable from every page
    r = here.post("/password?lang=en", data={"current": "alice-pass", "new": "correct horse", "confirm": "correct horse"})
    assert r.status_code == 302
    assert here.get(f"/api/submissions/{sid}").status_code == 200  # this browser stays signed in
    assert elsewhere.get(f"/api/submissions/{sid}").status_code == 401  # every other session ends
    assert elsewhere.get("/homework/").status_code == 302
    assert elsewhere.post("/login", data={"username": "alice", "password": "alice-pass"}).status_code == 401
    assert elsewhere.post("/login", data={"username": "alice", "password": "correct horse"}).status_code == 302


@pytest.mark.parametrize("form, status", [
    ({"current": "wrong", "new": "correct horse", "confirm": "correct horse"}, 401),
    ({"current": "alice-pass", "new": "short", "confirm": "short"}, 400),
    ({"current": "alice-pass", "new": "correct horse", "confirm": "correct hose"}, 400),
])
def test_password_page_refusals_change_nothing(app, client, auth, form, status):
    auth.login()
    r = client.post("/password?lang=en", data=form)
    assert r.status_code == status and 'name="current"' in r.get_data(as_text=True)
    assert client.get("/homework/").status_code == 200  # still signed in, password unchanged
    auth.logout()
    assert auth.login().status_code == 302


def test_password_page_guessing_is_throttled(client, auth):
    """A stolen session cannot try current passwords at speed either."""
    auth.login()
    for _ in range(5):
        assert client.post("/password?lang=en", data={"current": "guess", "new": "12345678",
                                                       "confirm": "12345678"}).status_code == 401
    r = client.post("/password?lang=en", data={"current": "alice-pass", "new": "12345678", "confirm": "12345678"})
    assert r.status_code == 429 and "Too many attempts" in r.get_data(as_text=True)


def test_cli_set_password_ends_sessions(app, client, auth, make_sub):
    sid = make_sub("alice")
    auth.login()
    with app.app_context():
        out = app.test_cli_runner().invoke(args=["users", "set-password", "alice", "--password", "from-the-cli"])
    assert out.exit_code == 0, out.output
    assert client.get(f"/api/submissions/{sid}").status_code == 401
    assert auth.login("alice", "from-the-cli").status_code == 302


def _reference_form(variant) -> dict:
    ref, qtype = variant.reference("en"), variant.question.type
    if qtype in ("single", "multiple"):
        return {"choice": ref.split(",")}
    if qtype == "ordering":
        return {f"pos_{i}": str(n + 1) for n, i in enumerate(ref.split(","))}
    return {"answer": ref}


def _card(page: str, pos: int) -> str:
    start = page.index(f'<section class="card quizq" id="q{pos}"')
    return page[start:page.index("</section>", start)]


def test_answered_cards_keep_their_variant_when_the_secret_changes(app, client, auth):
    """Seeds follow the secret, but an answer keeps the variant it was given (its stored seed):
    after a key rotation, or the upgrade from the public salt, no answered card changes numbers."""
    from server import apply_secret
    from server.quiz.attempts import variant_for
    from server.quiz.models import QuizAttempt

    auth.login()
    path = client.post("/quiz/ch7_3_practice/start").headers["Location"]
    aid = int(path.rstrip("/").split("/")[-1])
    with app.test_request_context():
        att = db.session.get(QuizAttempt, aid)
        forms = [_reference_form(variant_for(att, q)) for q in att.question_ids[:6]]
    for pos, form in enumerate(forms):
        assert client.post(f"{path}/answer/{pos}", data=form, headers={"Accept": "application/json"}).status_code == 200
    before = client.get(path + "?lang=en").get_data(as_text=True)

    app.config["SECRET_KEY"] = "a-rotated-secret-key-0123456789"
    apply_secret(app)
    app.extensions.pop("quiz_pages", None)  # as in a freshly started process
    auth.login()  # the old cookie's signature no longer holds
    after = client.get(path + "?lang=en").get_data(as_text=True)
    for pos in range(len(forms)):
        assert _card(after, pos) == _card(before, pos)
