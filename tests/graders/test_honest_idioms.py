"""The honest-idiom corpus: what honest scripts do must cost their authors nothing.

The corpus is a handful of sample submissions, ``assignments/*/samples/correct_idioms_*``, each
grouping several idioms that stay honest together (every script is otherwise a correct solution),
and each listing its idioms under ``Idioms:`` in its docstring. ``tests/graders/test_samples.py``
grades every one through the real worker path and requires status ``graded`` (no integrity
event) and passing checks; grouping keeps that to six torchrun gradings. This module checks the
corpus itself, cheaply: enough idioms, on both homeworks, each script clean for the static scan.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from graders import integrity

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for p in ROOT.glob("assignments/*/samples/correct_idioms_*") if p.is_dir())
MIN_IDIOMS = 30


def idioms_of(folder: Path) -> list[str]:
    """The idiom names listed under ``Idioms:`` in the sample script's docstring."""
    script = next(p for p in folder.iterdir() if p.suffix == ".py")
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    listed = doc.split("Idioms:", 1)[1] if "Idioms:" in doc else ""
    return re.findall(r"^- ([a-z0-9-]+):", listed, flags=re.M)


def test_the_corpus_covers_enough_idioms_on_both_homeworks() -> None:
    names = [n for folder in CORPUS for n in idioms_of(folder)]
    assert len(names) == len(set(names)), "an idiom is listed twice"
    assert len(names) >= MIN_IDIOMS, names
    homeworks = {folder.parent.parent.name for folder in CORPUS}
    assert {"ddp_speedup", "fsdp_fit"} <= homeworks
    for must in ("gc-collect", "cuda-empty-cache", "logging-basicconfig", "warnings-filter", "signal-handler",
                 "atexit", "dataloader-workers", "env-reads", "faulthandler", "torch-compile", "inspect-signature",
                 "traceback-print-exc", "functools-lru-cache", "metrics-thread", "fsdp-gc-collect"):
        assert must in names, must


@pytest.mark.parametrize("folder", CORPUS, ids=[f"{p.parent.parent.name}/{p.name}" for p in CORPUS])
def test_each_corpus_script_is_graded_clean(folder: Path) -> None:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    assert expected["status"] == "graded" and expected.get("min_score", 0) >= 90  # the sample test enforces it
    assert idioms_of(folder), "no Idioms: list"
    script = next(p for p in folder.iterdir() if p.suffix == ".py")
    assert integrity.scan_files([script]) == []
