"""GPU hosts without GPUs: real RQ workers on a simulated 4-GPU host (``DISTGRADE_FAKE_GPUS``).

Slots are real lock files and jobs get real indices; the probe grader runs on the CPU and
the worker records which GPUs each job held and when, so overlapping jobs can be checked
for double booking, also after a worker is SIGKILLed mid-job.
"""
from __future__ import annotations

import itertools
import signal

import pytest

from tests.server.grading.test_worker import all_final, probe_service, rows, submit, wait_until  # noqa: F401


@pytest.fixture
def gpu_host(tmp_path, redis_server):
    svc = probe_service(tmp_path, redis_server, timeout_s=30, lease_s=6, DISTGRADE_FAKE_GPUS="4", QUEUE_DEPTH="2")
    yield svc
    svc.stop()


def overlaps(a: dict, b: dict) -> bool:
    return a["held_from"] < b["held_to"] and b["held_from"] < a["held_to"]


def test_two_workers_share_four_fake_gpus_without_double_booking(gpu_host):
    jobs = [("gpu2", "sleep 2.5")] * 4 + [("gpu1", "sleep 2")] * 4
    ids = [submit(gpu_host.app, body, resource=res) for res, body in jobs]
    gpu_host.start_worker("w1")
    gpu_host.start_worker("w2")
    # SIGKILL w1 while it holds GPUs: its slots must come free without any lease expiring.
    wait_until(lambda: any(s.status == "running" and (s.progress_json or {}).get("phase") not in
                           ("starting", "preflight", "waiting_gpu", None)
                           for s in rows(gpu_host.app, ids).values()), 90, "a job holding GPUs")
    gpu_host.kill("w1", signal.SIGKILL)
    gpu_host.start_worker("w3")
    subs = wait_until(lambda: all_final(gpu_host.app, ids), 240, "all GPU jobs")
    assert [s.status for s in subs.values()] == ["graded"] * len(ids)
    assert all(s.results_stored == 1 for s in subs.values())
    held = {i: s.report_json["resources"] for i, s in subs.items()}
    for (res, _), (i, r) in zip(jobs, held.items()):
        assert len(r["gpus"]) == int(res[3:]) and r["fake"] and set(r["gpus"]) <= {0, 1, 2, 3}
        # the grader saw exactly the GPUs it was given, and ran in CPU mode
        assert subs[i].report_json["checks"][0]["evidence"]["gpus"] == ",".join(map(str, r["gpus"]))
        assert subs[i].report_json["mode"] == "cpu"
    for (a, ra), (b, rb) in itertools.combinations(held.items(), 2):
        if overlaps(ra, rb):
            assert not set(ra["gpus"]) & set(rb["gpus"]), f"#{a} {ra} and #{b} {rb} shared a GPU"
    assert any(overlaps(ra, rb) for ra, rb in itertools.combinations(held.values(), 2)), "nothing ran in parallel"
    assert max(s.grading_runs for s in subs.values()) == 2  # the job w1 held ran again, on free GPUs
    # 2-GPU jobs were never starved by the 1-GPU ones: none waited long for its pair
    assert max(r["waited_s"] for (res, _), r in zip(jobs, held.values()) if res == "gpu2") < 20


def test_preflight_grades_a_broken_script_without_a_gpu(gpu_host):
    bad, good = submit(gpu_host.app, "broken", resource="gpu2"), submit(gpu_host.app, "score 1", resource="gpu2")
    gpu_host.start_worker("w1")
    subs = wait_until(lambda: all_final(gpu_host.app, [bad, good]), 90, "pre-flight and GPU run")
    b, g = subs[bad], subs[good]
    assert b.status == "graded" and b.score == 0 and b.results_stored == 1
    assert b.report_json["preflight"] == {"final": True, "failed": ["probe.ran"]}
    assert "resources" not in b.report_json  # it never took a GPU slot
    assert b.report_json["checks"][0]["evidence"] == {"gpus": "", "preflight": True}
    assert "not run on a GPU" in b.report_json["summary"]["en"]
    assert g.status == "graded" and g.score == 1 and len(g.report_json["resources"]["gpus"]) == 2
    assert g.report_json["checks"][0]["evidence"]["preflight"] is False
