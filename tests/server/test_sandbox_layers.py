"""Staff see each worker's sandbox layers: the probe a worker stores in Redis at start-up, shown
on the queue-health page (missing layers first), and printed by ``./distgrade up``."""
from __future__ import annotations

import os

import pytest

from server import sandbox_layers

FULL = {"enforcement": "required", "bwrap": "/x/bwrap", "missing": [], "error": None,
        "layers": ["uid:60100", "bwrap", "netns:loopback", "pidns", "allow-list", "cgroup-v1:memory"],
        "degraded": ["cpus: shared with every other job (DISTGRADE_JOB_CPUS not set)"]}
BROKEN = {"enforcement": "required", "bwrap": None, "layers": ["uid:60100", "cgroup-v1:memory"],
          "degraded": ["bwrap: not installed"], "missing": ["network namespace"], "error": "refusing to run",
          "modules": ["torchvision (ddp_speedup): ModuleNotFoundError: No module named 'torchvision'"]}


def test_describe_says_what_is_missing_and_what_follows() -> None:
    text = sandbox_layers.describe(BROKEN)
    assert "MISSING: network namespace" in text and "infrastructure errors" in text and "DISTGRADE_SANDBOX=none" in text
    assert "MISSING" not in sandbox_layers.describe(FULL) and "allow-list" in sandbox_layers.describe(FULL)
    assert "cannot import (submissions that do are not graded here): torchvision (ddp_speedup)" in text
    assert "cannot import" not in sandbox_layers.describe(FULL)


@pytest.mark.parametrize("given, result", [(None, "required"), ("auto", "required"), ("required", "required"),
                                           ("none", "none")])
def test_workers_fail_closed_unless_the_operator_said_none(monkeypatch: pytest.MonkeyPatch, given, result) -> None:
    if given is None:
        monkeypatch.delenv("DISTGRADE_SANDBOX", raising=False)
    else:
        monkeypatch.setenv("DISTGRADE_SANDBOX", given)
    sandbox_layers.fail_closed_by_default()
    assert os.environ["DISTGRADE_SANDBOX"] == result


def test_queue_health_page_shows_each_workers_layers(app, client, auth) -> None:
    from rq import Queue, Worker

    from server.grading.queue import queues_for_host, redis_conn

    with app.app_context():
        conn = redis_conn()
        good = Worker([Queue(n, connection=conn) for n in queues_for_host(0)], connection=conn, name="cpu-ok")
        bad = Worker([Queue(n, connection=conn) for n in queues_for_host(0)], connection=conn, name="cpu-broken")
        for w, found in ((good, FULL), (bad, BROKEN)):
            w.register_birth()
            sandbox_layers.publish(conn, w.name, found)
    try:
        auth.login("teacher", "teacher-pass")
        html = client.get("/dashboard/DIST101/queue", headers={"Accept-Language": "en"}).get_data(as_text=True)
        zh = client.get("/dashboard/DIST101/queue", headers={"Accept-Language": "zh-CN"}).get_data(as_text=True)
    finally:
        good.register_death()
        bad.register_death()
    assert "Sandbox layers" in html and "netns:loopback" in html
    assert "Missing, grading refused:" in html and "network namespace" in html and "bwrap: not installed" in html
    assert html.count("Missing, grading refused:") == 1  # only the broken worker
    assert html.count("Cannot import, submissions using it are not graded here:") == 1
    assert "No module named &#39;torchvision&#39;" in html
    assert "沙箱防护层" in zh and "缺少防护层，拒绝评分：" in zh and "无法导入，用到它的提交不在本机评分" in zh


def test_queue_health_page_shows_supervisor_restarts(app, client, auth) -> None:
    """A Redis or web server that ``./distgrade up`` had to start again is told to staff, with when and why."""
    import json
    import time
    from pathlib import Path

    (Path(app.config["VAR_DIR"]) / "supervisor.json").write_text(
        json.dumps({"redis": {"restarts": 2, "last_exit": -9, "last_at": time.time() - 90}}))
    auth.login("teacher", "teacher-pass")
    en = client.get("/dashboard/DIST101/queue", headers={"Accept-Language": "en"}).get_data(as_text=True)
    zh = client.get("/dashboard/DIST101/queue", headers={"Accept-Language": "zh-CN"}).get_data(as_text=True)
    assert "Restarted service processes" in en and "killed by signal 9" in en
    assert "重启过的服务进程" in zh and "被信号 9 终止" in zh
