"""Generate the student release notebook from the nbgrader source with nbgrader's own command.

``python -m graders.config_annotation.release``          rewrite ``release/config_annotation.ipynb``
``python -m graders.config_annotation.release --check``  exit 1 if the committed file is stale

The release lives at a stable path the web app links to; solutions become stubs and hidden
tests disappear, exactly as ``nbgrader generate_assignment`` makes them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from coursework.settings import assignments_dir

FOLDER = assignments_dir() / "config_annotation"
NAME = "config_annotation"
RELEASE = FOLDER / "release" / f"{NAME}.ipynb"
CODE_STUB = "# 在上面作答 / answer above"
TEXT_STUB = "在这里作答 / YOUR ANSWER HERE"


def nbgrader_config(root: Path):
    """The nbgrader config both generate and autograde use for this course folder."""
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(root)
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    c.ClearSolutions.text_stub = TEXT_STUB
    return c


def ensure_tools_on_path() -> None:
    """nbgrader's Gradebook runs the ``alembic`` executable by name: make the venv's bin findable."""
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def generate(root: Path) -> Path:
    """Run ``generate_assignment`` in course folder ``root`` (source copied in); returns the release."""
    from nbgrader.apps import NbGraderAPI

    ensure_tools_on_path()
    if not (root / "source" / NAME).exists():
        shutil.copytree(FOLDER / "source" / NAME, root / "source" / NAME)
    result = NbGraderAPI(config=nbgrader_config(root)).generate_assignment(NAME)
    if not result.get("success"):
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{result.get('error') or result.get('log')}")
    return root / "release" / NAME / f"{NAME}.ipynb"


def rendered() -> str:
    """The release notebook as nbgrader generates it now (normalised JSON text)."""
    with tempfile.TemporaryDirectory() as tmp:
        nb = json.loads(generate(Path(tmp)).read_text(encoding="utf-8"))
    return json.dumps(nb, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.config_annotation.release")
    parser.add_argument("--check", action="store_true", help="fail if the committed release is stale")
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        current = RELEASE.read_text(encoding="utf-8") if RELEASE.is_file() else ""
        if current != text:
            print(f"{RELEASE} is stale: run python -m graders.config_annotation.release", file=sys.stderr)
            return 1
        print(f"{RELEASE} is current")
        return 0
    RELEASE.parent.mkdir(parents=True, exist_ok=True)
    RELEASE.write_text(text, encoding="utf-8")
    print(f"wrote {RELEASE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
