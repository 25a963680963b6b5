"""Where a run's cgroup goes on a cgroup-v2 host whose service group cannot delegate.

The kernel is not emulated here: a folder tree stands for ``/sys/fs/cgroup`` with the
``cgroup.controllers`` files the kernel would show. A group holding processes of its own
shows no controllers to a new child ("no internal processes"), as on the first GPU host
(a VM whose command group held the worker): every run was refused for want of a memory
limit although the tree above delegated memory and pids.
"""
from __future__ import annotations

from pathlib import Path

from graders.sandbox import cgroups


def fake_tree(root: Path, delegating: list[str]) -> None:
    """``root`` as a v2 mount; each path in ``delegating`` hands memory and pids to its children."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for rel in delegating:
        base = root / rel / "distgrade"
        base.mkdir(parents=True, exist_ok=True)
        (base / "cgroup.controllers").write_text("memory pids\n")  # what the kernel shows a child there


def test_run_group_goes_to_the_nearest_ancestor_that_delegates(tmp_path, monkeypatch):
    root = tmp_path / "cg"
    fake_tree(root, ["process_api"])
    (root / "process_api" / "job1").mkdir()  # the service's own group: processes, no controllers for children
    monkeypatch.setattr(cgroups, "CGROUP_MOUNT", root)
    cg, missing = cgroups._create_v2({"": "/process_api/job1"}, 1 << 30, 64, None)
    assert cg is not None and missing == []
    run = cg.dirs["memory"]
    assert run.parent == root / "process_api" / "distgrade" and cg.dirs["pids"] == run
    assert (run / "memory.max").read_text() == str(1 << 30) and (run / "pids.max").read_text() == "64"
    assert not (root / "process_api" / "job1" / "distgrade").exists(), "an unusable base is left behind"


def test_own_group_is_preferred_when_it_delegates(tmp_path, monkeypatch):
    root = tmp_path / "cg"
    fake_tree(root, ["svc", ""])
    monkeypatch.setattr(cgroups, "CGROUP_MOUNT", root)
    cg, _ = cgroups._create_v2({"": "/svc"}, 1 << 30, 64, None)
    assert cg.dirs["memory"].parent == root / "svc" / "distgrade"


def test_nothing_delegates_is_reported_missing(tmp_path, monkeypatch):
    root = tmp_path / "cg"
    fake_tree(root, [])
    (root / "a").mkdir()
    monkeypatch.setattr(cgroups, "CGROUP_MOUNT", root)
    cg, missing = cgroups._create_v2({"": "/a"}, 1 << 30, 64, None)
    assert cg is None and "memory/pids" in missing[0]


def test_sweep_removes_dead_creators_groups_only(tmp_path, monkeypatch):
    """A killed grader's empty run groups go at the next sweep, not at the next run; a live one's stay."""
    import os

    root = tmp_path / "cg"
    fake_tree(root, [""])
    base = root / "distgrade"
    dead, live = base / "run-999999999-aaaa", base / f"run-{os.getpid()}-bbbb"
    dead.mkdir()
    live.mkdir()
    monkeypatch.setattr(cgroups, "CGROUP_MOUNT", root)
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": "/"})
    assert cgroups.sweep() == 1
    assert not dead.exists() and live.exists()
