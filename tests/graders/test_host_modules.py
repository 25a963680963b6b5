"""A module the assignment allows and the host cannot import is the host's failure, not the student's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from graders import host_modules
from graders.exceptions import InfrastructureError

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "distgrade_no_such_module_for_tests"


def test_imports_written_in_the_script_are_found(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import os, torchvision.transforms as T\nfrom torchvision import datasets\n"
                      "from . import sibling\nfrom numpy.random import default_rng\n"
                      "def f():\n    import json\n", encoding="utf-8")
    assert host_modules.imported(script) == {"os", "torchvision", "numpy", "json"}
    script.write_text("import torchvision\ndef broken(:\n", encoding="utf-8")
    assert host_modules.imported(script) == set()  # the run reports the syntax error itself


def test_import_error_tells_present_from_absent() -> None:
    assert host_modules.import_error("json") is None
    assert "ModuleNotFoundError" in host_modules.import_error(ABSENT)
    assert "not a module name" in host_modules.import_error("os; import sys")


def test_a_script_importing_an_allowed_module_the_host_lacks_is_not_graded_here(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(f"import json\nfrom {ABSENT}.sub import thing\n", encoding="utf-8")
    with pytest.raises(host_modules.HostLacksModule) as caught:
        host_modules.check_script(script, {"host_modules": [ABSENT]})
    assert isinstance(caught.value, InfrastructureError)  # retried, no attempt used
    assert f"cannot import {ABSENT}" in str(caught.value)
    host_modules.check_script(script, {})  # not promised: the student's own import error, graded as such
    host_modules.check_script(script, {"host_modules": ["json"]})  # promised and present


def test_a_module_imported_at_run_time_is_judged_after_the_run() -> None:
    cfg = {"host_modules": [ABSENT, "json"]}
    raised = [None, {"exc_type": "ModuleNotFoundError", "message": f"No module named '{ABSENT}'"}]
    with pytest.raises(host_modules.HostLacksModule):
        host_modules.check_raised(raised, cfg)
    host_modules.check_raised([{"exc_type": "ModuleNotFoundError", "message": "No module named 'other'"}], cfg)
    host_modules.check_raised([{"exc_type": "ValueError", "message": f"No module named '{ABSENT}'"}], cfg)
    host_modules.check_raised([{"exc_type": "ModuleNotFoundError", "message": "No module named 'json'"}], cfg)


def test_homework_1_promises_torchvision_and_the_probe_names_it_where_missing() -> None:
    from coursework.assignments import all_assignments

    cfg = json.loads((ROOT / "assignments/ddp_speedup/assignment.json").read_text(encoding="utf-8"))
    assert host_modules.promised(cfg) == ["torchvision", "tqdm"]  # the README says CIFAR10 loads through torchvision
    lines = host_modules.probe(all_assignments())
    missing = host_modules.import_error("torchvision")
    assert bool(lines) == bool(missing)
    if missing:
        assert lines[0].startswith("torchvision (ddp_speedup): ")


def test_the_import_failure_message_names_what_the_host_has() -> None:
    """A script importing what no grading host has is the student's to fix: the message says what there is."""
    cfg = json.loads((ROOT / "assignments/ddp_speedup/assignment.json").read_text(encoding="utf-8"))
    for check in ("run.single", "run.distributed"):
        message = cfg["checks"][check]["messages"]["raised_import"]
        for name in ["torch", "numpy", *host_modules.promised(cfg)]:
            assert name in message["en"] and name in message["zh"], (check, name)
    assert host_modules.import_error("tqdm") is None  # a dependency of the service: on every host
