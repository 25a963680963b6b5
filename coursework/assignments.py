"""Assignments are data: one folder per homework under ``assignments/``.

``assignment.json`` holds the title, the grader entry point, upload rules,
limits and per-check points; the folder also holds the student-facing README,
starter code, the reference solution and outcome-named sample submissions.
"""
from __future__ import annotations

import importlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from coursework import settings
from coursework.exceptions import AssignmentNotFound, SubmissionRejected


@dataclass
class Assignment:
    """An assignment folder and its parsed ``assignment.json``."""

    id: str
    path: Path
    title: dict[str, str]
    grader: str  # "module:function"
    resource: str = "cpu"  # queue class: cpu, gpu1, gpu2 ... (old single-mode form)
    resources: dict[str, str] = field(default_factory=dict)  # mode -> queue class, e.g. {"gpu": "gpu2"}
    upload: dict[str, Any] = field(default_factory=dict)
    attempts: int = 10
    limits: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.upload.get("max_bytes", 256 * 1024))

    @property
    def extensions(self) -> list[str]:
        return list(self.upload.get("extensions", [".py"]))

    def resource_for(self, mode: str) -> str:
        """The queue class a job of this assignment needs when graded in ``mode`` (cpu | gpu)."""
        return self.resources.get(mode) or self.resource

    def grader_function(self) -> Callable[..., Any]:
        """Import and return the grading function named in ``assignment.json``."""
        module_name, _, func = self.grader.partition(":")
        return getattr(importlib.import_module(module_name), func)

    def validate_upload(self, filename: str, data: bytes) -> None:
        """Raise ``SubmissionRejected`` with a bilingual reason if the file cannot be graded."""
        ext = os.path.splitext(filename)[1].lower()
        if ext not in self.extensions:
            allowed = ", ".join(self.extensions)
            raise SubmissionRejected(f"文件类型 {ext or '(无)'} 不被接受，请上传 {allowed} 文件。",
                                     f"File type {ext or '(none)'} is not accepted; upload a {allowed} file.")
        if len(data) == 0:
            raise SubmissionRejected("文件是空的。", "The file is empty.")
        if len(data) > self.max_upload_bytes:
            raise SubmissionRejected(
                f"文件过大（{len(data):,} 字节），上限为 {self.max_upload_bytes:,} 字节。",
                f"The file is too large ({len(data):,} bytes); the limit is {self.max_upload_bytes:,} bytes.")
        if ext in (".py", ".yaml", ".yml", ".json", ".txt"):
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise SubmissionRejected("文件不是 UTF-8 文本。", "The file is not UTF-8 text.") from None
        validator = self.upload.get("validator")  # "module:function", the assignment's own format check
        if validator:
            module_name, _, func = validator.partition(":")
            getattr(importlib.import_module(module_name), func)(filename, data)


def load(assignment_id: str) -> Assignment:
    """Load one assignment by folder name."""
    if not assignment_id or "/" in assignment_id or assignment_id.startswith("."):
        raise AssignmentNotFound(assignment_id)
    path = settings.assignments_dir() / assignment_id
    meta_file = path / "assignment.json"
    if not meta_file.is_file():
        raise AssignmentNotFound(assignment_id)
    raw = json.loads(meta_file.read_text(encoding="utf-8"))
    return Assignment(
        id=assignment_id, path=path, title=raw["title"], grader=raw["grader"],
        resource=raw.get("resource", "cpu"), resources=_resources(raw), upload=raw.get("upload", {}),
        attempts=int(raw.get("attempts", 10)), limits=raw.get("limits", {}),
        checks=raw.get("checks", {}), raw=raw,
    )


def _resources(raw: dict[str, Any]) -> dict[str, str]:
    """``"resources": {"cpu": "cpu", "gpu": "gpu2"}``: what a job needs in each grading mode."""
    out = raw.get("resources") or {}
    if not isinstance(out, dict) or not all(
            m in ("cpu", "gpu") and isinstance(r, str) and re.fullmatch(r"cpu|gpu[1-9]\d?", r) for m, r in out.items()):
        raise ValueError(f"assignment.json 'resources' must map cpu/gpu to cpu or gpuN, not {out!r}")
    return dict(out)


def all_assignments() -> list[Assignment]:
    """Every assignment folder, sorted by id."""
    root = settings.assignments_dir()
    if not root.is_dir():
        return []
    return [load(p.name) for p in sorted(root.iterdir()) if (p / "assignment.json").is_file()]
