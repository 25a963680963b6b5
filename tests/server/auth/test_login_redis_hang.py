"""A Redis that hangs (accepts, never answers) must not make every sign-in wait.

The sign-in counters and the owner's shortcuts (known devices and addresses) live in Redis. While
it hung, each sign-in paid the limiter's 1 s timeout, and redis-py's retries on top of it, for every
call (5.7 s for one POST): the limiter never skipped Redis after a failure. Now the first call to
fail makes the whole process leave Redis alone for a few seconds, as uploads already did; the
counters then run in memory, so guessing stays throttled.
"""
from __future__ import annotations

import socket
import time

from server.grading import queue


def _post(client, username, password):
    started = time.monotonic()
    code = client.post("/login", data={"username": username, "password": password},
                       environ_base={"REMOTE_ADDR": "10.1.2.3"}).status_code
    return code, time.monotonic() - started


def test_a_hung_redis_costs_one_sign_in_a_bounded_wait_and_the_rest_nothing(app):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections complete in the kernel's backlog; nothing ever replies
    from server import create_app

    hung = create_app({**{k: app.config[k] for k in ("TESTING", "SQLALCHEMY_DATABASE_URI", "VAR_DIR",
                                                        "WTF_CSRF_ENABLED", "SECRET_KEY")},
                       "REDIS_URL": f"redis://127.0.0.1:{silent.getsockname()[1]}/0"})
    base = max(_post(app.test_client(), "bob", "wrong")[1] for _ in range(3))  # password hashing, a busy host
    try:
        client = hung.test_client()
        first = _post(client, "alice", "wrong")
        rest = [_post(client, "alice", "wrong") for _ in range(4)]
        right = _post(hung.test_client(), "bob", "bob-pass")
        assert first[0] == 401 and first[1] < 3, first  # one timed-out call, not one per call
        assert [code for code, _ in rest] == [401] * 4
        assert max(s for _, s in rest) < base + 0.5, (base, rest)  # Redis is skipped after it failed
        assert right[0] == 302 and right[1] < base + 0.5, (base, right)
        # still counted (in memory) and throttled: over the limit the account's turn closes for a
        # growing back-off (2, 4, 8 s), so back-to-back guesses meet a 429
        assert 429 in [_post(client, "alice", "wrong")[0] for _ in range(3)]
    finally:
        silent.close()
        queue.redis_recovered()
