"""``/api/submissions/<id>``: the status JSON the live page polls."""
from __future__ import annotations

import io

import pytest


def test_queued_submission_has_position(client, auth, hw):
    auth.login()
    client.post("/homework/DIST101/hello_ddp", data={"file": (io.BytesIO(b"print(1)\n"), "train.py")},
                content_type="multipart/form-data")
    auth.logout()
    auth.login("bob", "bob-pass")
    client.post("/homework/DIST101/hello_ddp", data={"file": (io.BytesIO(b"print(2)\n"), "train.py")},
                content_type="multipart/form-data")
    auth.logout()
    auth.login()
    first = client.get("/api/submissions/1")
    assert first.status_code == 200 and first.headers["Cache-Control"] == "no-store"
    assert (first.json["status"], first.json["queue_position"]) == ("queued", 1)
    assert first.json["elapsed_s"] >= 0 and "report_url" not in first.json
    assert "eta_s" in first.json  # no worker serves the queue here: None
    # alice's second upload replaces her waiting first one; bob's job was already handed to RQ
    # (QUEUE_DEPTH), so it stays ahead (test_fair_queue checks the place kept in the database)
    client.post("/homework/DIST101/hello_ddp", data={"file": (io.BytesIO(b"print(3)\n"), "train.py")},
                content_type="multipart/form-data")
    first, third = client.get("/api/submissions/1").json, client.get("/api/submissions/3").json
    assert (first["status"], first["queue_position"], first["replaced_by"]) == ("replaced", None, 3)
    assert third["queue_position"] == 2


def test_running_submission_has_progress_and_elapsed(client, auth, make_sub):
    sid = make_sub(status="running", progress_json={"phase": "training", "logs": {"rank0": "a", "rank1": "b"}})
    auth.login()
    data = client.get(f"/api/submissions/{sid}").json
    assert data["status"] == "running" and data["queue_position"] is None
    assert data["progress"]["logs"] == {"rank0": "a", "rank1": "b"}
    assert data["elapsed_s"] is not None and "report_url" not in data


@pytest.mark.parametrize("status", ["graded", "error"])
def test_finished_submission_links_its_report(client, auth, make_sub, status):
    sid = make_sub(status=status)
    auth.login()
    data = client.get(f"/api/submissions/{sid}").json
    assert data["report_url"] == f"/submissions/{sid}/report"
    assert set(data) >= {"id", "status", "score", "max_score", "sha256", "created_at", "finished_at"}


def test_status_never_leaks_staff_detail(client, auth, make_sub):
    sid = make_sub(status="error", error_detail="Traceback secret")
    auth.login()
    assert b"secret" not in client.get(f"/api/submissions/{sid}").data


@pytest.mark.parametrize("who, code", [("alice", 404), ("bob", 200), ("teacher", 200)])
def test_access_by_owner_and_instructor(client, auth, make_sub, who, code):
    sid = make_sub(username="bob")
    auth.login(who, f"{who}-pass")
    r = client.get(f"/api/submissions/{sid}")
    assert r.status_code == code and r.is_json


def test_unknown_id_is_404_json(client, auth):
    auth.login()
    r = client.get("/api/submissions/424242")
    assert r.status_code == 404 and r.is_json
