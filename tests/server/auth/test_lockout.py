"""Sign-in throttling throttles the guesser, not the owner.

Five wrong passwords a minute for a username (no account needed) kept its owner at 429
indefinitely, and the per-address limit could do the same to a lab behind one address. Now the
strict limit is per account *and* address; the looser per-account limit is passed by a device the
owner signed in from before (a signed cookie) or an address they signed in from before; and the
owner is told how many wrong passwords were tried since their last sign-in.
"""
from __future__ import annotations


def _post(client, username, password, addr, lang="en"):
    return client.post(f"/login?lang={lang}", data={"username": username, "password": password},
                       environ_base={"REMOTE_ADDR": addr})


def _guess(app, username: str, addr: str, n: int) -> list[int]:
    guesser = app.test_client()  # the classmate's own browser: no cookie of the owner's
    return [_post(guesser, username, f"guess{i}", addr).status_code for i in range(n)]


def test_a_classmate_guessing_elsewhere_does_not_lock_the_owner_out(app) -> None:
    codes = _guess(app, "alice", "10.0.5.1", 8)
    assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}  # the guesser is throttled
    owner = app.test_client()  # a fresh browser at home: no cookie, an address never seen
    assert _post(owner, "alice", "alice-pass", "10.0.5.2").status_code == 302


def test_the_owner_on_the_guessers_address_passes_with_a_known_device(app) -> None:
    """A lab behind one address: the guesser sits next to the owner. The owner's browser, where
    she signed in before, still signs in; the guesser's does not."""
    owner = app.test_client()
    assert _post(owner, "alice", "alice-pass", "10.0.9.9").status_code == 302
    owner.post("/logout")
    codes = _guess(app, "alice", "10.0.9.9", 7)
    assert set(codes[5:]) == {429}
    # and the whole lab's address: a classmate spends its allowance on made-up names
    limit = int(app.config["LOGIN_LIMIT_ADDRESS"].split()[0])
    guesser = app.test_client()
    for i in range(limit + 1):
        _post(guesser, f"nobody{i}", "x", "10.0.9.9")
    assert _post(guesser, "alice", "alice-pass", "10.0.9.9").status_code == 429
    assert _post(owner, "alice", "alice-pass", "10.0.9.9").status_code == 302


def test_guessing_from_many_addresses_is_throttled_per_account_but_not_for_the_owner(app) -> None:
    limit = int(app.config["LOGIN_LIMIT_ACCOUNT"].split()[0])
    home = app.test_client()
    assert _post(home, "alice", "alice-pass", "10.0.7.7").status_code == 302
    home.post("/logout")
    home.delete_cookie("dg_device")  # even without the device cookie: an address she signed in from
    codes = [_post(app.test_client(), "alice", "x", f"10.0.6.{i}").status_code for i in range(limit + 2)]
    assert codes[:limit] == [401] * limit and codes[-1] == 429  # a botnet is throttled per account
    assert _post(app.test_client(), "alice", "alice-pass", "10.0.6.250").status_code == 429
    assert _post(home, "alice", "alice-pass", "10.0.7.7").status_code == 302


def test_the_owner_is_told_what_happened(app) -> None:
    _guess(app, "alice", "10.0.5.1", 7)
    for lang, told in (("en", "7 failed sign-in attempts"), ("zh_CN", "7 次登录失败")):
        owner = app.test_client()
        resp = _post(owner, "alice", "alice-pass", "10.0.5.3", lang=lang)
        page = owner.get(resp.headers["Location"] + f"?lang={lang}").get_data(as_text=True)
        if lang == "en":
            assert told in page and "since your last sign-in" in page, page[:2000]
            owner.post("/logout")
            _guess(app, "alice", "10.0.5.4", 7)
        else:
            assert told in page and "上次登录以来" in page
    # told once: the next sign-in says nothing more
    owner = app.test_client()
    resp = _post(owner, "alice", "alice-pass", "10.0.5.3")
    assert "failed sign-in attempts" not in owner.get(resp.headers["Location"] + "?lang=en").get_data(as_text=True)


def test_a_guesser_cannot_forge_the_device_cookie(app) -> None:
    guesser = app.test_client()
    guesser.set_cookie("dg_device", "alice")
    codes = [_post(guesser, "alice", "x", "10.0.8.1").status_code for _ in range(7)]
    assert set(codes[5:]) == {429}


def _wait_told(page: str) -> int:
    import re

    return int(re.search(r"try again in (\d+) s", page).group(1))


def test_a_classmate_behind_the_same_address_delays_the_owners_first_sign_in_by_seconds(app) -> None:
    """A lab's NAT: five wrong passwords for alice from the shared address, then alice herself, in a
    fresh browser on that address for the first time, was answered 429 for the rest of the minute
    (and a classmate could keep it so). Over the limit a guess now waits its turn per account, the
    wait doubling with each further wrong password (at most ``LOGIN_BACKOFF_MAX``): the right
    password gets in at the next turn."""
    import time

    assert _guess(app, "alice", "10.0.5.1", 5) == [401] * 5
    owner = app.test_client()
    first = _post(owner, "alice", "alice-pass", "10.0.5.1")
    if first.status_code == 429:
        wait = _wait_told(first.get_data(as_text=True))
        assert wait <= 2, wait  # the first turn comes after the shortest back-off
        time.sleep(wait)
        first = _post(owner, "alice", "alice-pass", "10.0.5.1")
    assert first.status_code == 302


def test_guessing_over_the_limit_is_slowed_more_with_every_wrong_password(app) -> None:
    """The guesser is not refused for good, but every turn it takes costs a longer wait, up to
    ``LOGIN_BACKOFF_MAX`` seconds per account (what guessing costs is in the README)."""
    import time

    from server.auth import throttle

    assert [throttle.backoff_s(level, 60) for level in range(1, 9)] == [2, 4, 8, 16, 32, 60, 60, 60]
    guesser = app.test_client()
    assert [_post(guesser, "alice", f"g{i}", "10.0.5.7").status_code for i in range(6)] == [401] * 5 + [429]
    time.sleep(_wait_told(_post(guesser, "alice", "g", "10.0.5.7").get_data(as_text=True)))
    assert _post(guesser, "alice", "g6", "10.0.5.7").status_code == 401  # its turn: checked, wrong
    assert _wait_told(_post(guesser, "alice", "g7", "10.0.5.7").get_data(as_text=True)) > 2  # the next wait is longer
