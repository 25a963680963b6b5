"""The question bank on disk: a question is a folder under ``quizzes/`` and its path is its id.

A folder holds ``info.json`` (metadata, bilingual prompt, answer or rubric, feedback,
explanation), optionally ``generator.py`` (``generate(rng) -> {"params", "answer", ...}``,
pure: no I/O) and ``examples.json`` (graded example answers, checked by one test).
A quiz is ``quizzes/<name>.json``: a list of question ids plus its settings.
"""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from coursework.quiz.result import Text
from coursework.settings import quizzes_dir
from coursework.text import pick

QUIZ_ROOT = quizzes_dir()
TYPES = ("single", "multiple", "numeric", "text", "ordering")


class BankError(LookupError):
    """A question or quiz id that does not exist, or a malformed folder."""


@dataclass
class Question:
    """One question folder, loaded."""

    id: str
    folder: Path
    info: dict[str, Any]
    generator: ModuleType | None = None

    @property
    def type(self) -> str:
        return self.info["type"]

    @property
    def points(self) -> float:
        return float(self.info.get("points", 1))

    @property
    def section(self) -> str:
        return str(self.info.get("section", ""))

    def text(self, key: str, lang: str) -> str:
        """A bilingual field in ``lang`` (falls back to the other language)."""
        return pick(self.info.get(key), lang)

    @property
    def examples(self) -> list[dict[str, Any]]:
        path = self.folder / "examples.json"
        return json.loads(path.read_text("utf-8")) if path.exists() else []


@dataclass
class Quiz:
    """A list of question ids with its settings (mode, attempts, time window)."""

    id: str
    title: Text
    question_ids: list[str]
    mode: str = "practice"  # practice: unlimited, new variant each time | graded: limited attempts
    attempt_limit: int | None = None
    score_policy: str = "best"  # best | last
    opens_at: str | None = None  # ISO datetimes, UTC
    closes_at: str | None = None
    description: Text = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    # When a graded quiz shows its reference answers (and explanations): "after_close" (once
    # closes_at has passed; never while the quiz has no closing time), "never", or "at_once" (right
    # after answering; a question whose text never changes only in the student's last attempt).
    reference_answers: str = "after_close"

    @property
    def opens(self) -> datetime | None:
        """``opens_at`` as a naive UTC datetime (a trailing ``Z`` allowed), or None."""
        return _utc(self.opens_at)

    @property
    def closes(self) -> datetime | None:
        """``closes_at`` as a naive UTC datetime, or None."""
        return _utc(self.closes_at)


def _utc(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "")) if value else None


def _load_generator(folder: Path, qid: str) -> ModuleType | None:
    path = folder / "generator.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"quizgen_{qid.replace('/', '__')}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=512)
def load_question(qid: str, root: Path = QUIZ_ROOT) -> Question:
    """The question whose folder is ``root/qid`` (cached: content changes need a restart)."""
    folder = (root / qid).resolve()
    if root.resolve() not in folder.parents or not (folder / "info.json").exists():
        raise BankError(f"no question {qid!r}")
    info = json.loads((folder / "info.json").read_text("utf-8"))
    if info.get("type") not in TYPES:
        raise BankError(f"{qid}: type must be one of {TYPES}")
    return Question(id=qid, folder=folder, info=info, generator=_load_generator(folder, qid))


def all_question_ids(root: Path = QUIZ_ROOT) -> list[str]:
    """Every question folder under ``root``, sorted."""
    return sorted(str(p.parent.relative_to(root)) for p in root.rglob("info.json"))


@lru_cache(maxsize=64)
def load_quiz(quiz_id: str, root: Path = QUIZ_ROOT) -> Quiz:
    """``root/<quiz_id>.json`` as a Quiz; every listed question must exist."""
    path = (root / f"{quiz_id}.json").resolve()
    if root.resolve() not in path.parents or not path.exists():
        raise BankError(f"no quiz {quiz_id!r}")
    d = json.loads(path.read_text("utf-8"))
    for qid in d["questions"]:
        load_question(qid, root)
    return Quiz(id=quiz_id, title=d["title"], question_ids=list(d["questions"]), mode=d.get("mode", "practice"),
                attempt_limit=d.get("attempt_limit"), score_policy=d.get("score_policy", "best"),
                opens_at=d.get("opens_at"), closes_at=d.get("closes_at"), description=d.get("description", {}),
                raw=d, reference_answers=_reference_policy(quiz_id, d.get("reference_answers", "after_close")))


REFERENCE_POLICIES = ("after_close", "never", "at_once")


def _reference_policy(quiz_id: str, value: str) -> str:
    if value not in REFERENCE_POLICIES:
        raise BankError(f"{quiz_id}: reference_answers must be one of {REFERENCE_POLICIES}")
    return value


def all_quiz_ids(root: Path = QUIZ_ROOT) -> list[str]:
    """Quiz files directly under ``root``."""
    return sorted(p.stem for p in root.glob("*.json"))


@lru_cache(maxsize=16)
def sections(chapter: str = "ch7_3", root: Path = QUIZ_ROOT) -> dict[str, Text]:
    """Section number -> bilingual title, for "reread these sections" advice."""
    path = root / chapter / "sections.json"
    return json.loads(path.read_text("utf-8")) if path.exists() else {}
