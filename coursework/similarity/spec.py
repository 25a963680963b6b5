"""How an assignment is compared: its ``"similarity"`` block in ``assignment.json``.

::

    "similarity": {"kind": "code", "boilerplate": ["starter", "solution"], "threshold": 0.5}

``kind`` is ``code`` (Python, notebooks' code cells) or ``annotations`` (homework 2's comments);
``boilerplate`` names folders of the assignment whose files never count as a student's own
(the starter, the reference solution, the released notebook); ``public`` (default true) adds the
public patterns of the kind (``coursework/similarity/public/<kind>/``: helpers pasted verbatim
from public examples, the same for every class); the other keys override ``compare.Settings``. An earlier term's submissions are a reference corpus: files under
``<corpus dir>/<assignment id>/`` (``SIMILARITY_CORPUS_DIR``), compared with this term's
students, never with each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coursework.similarity.compare import Doc, Settings
from coursework.similarity.extract import extract

SUFFIXES = (".py", ".ipynb", ".yaml", ".yml", ".json")
MAX_FILES = 2000  # a corpus folder is the operator's, but still bounded
MAX_FILE_BYTES = 2 * 1024 * 1024
PUBLIC = Path(__file__).resolve().parent / "public"


@dataclass
class Spec:
    """What ``compare`` needs for one assignment, read from its folder."""

    kind: str = "code"
    boilerplate: list[str] = field(default_factory=list)
    public: list[str] = field(default_factory=list)  # public patterns: boilerplate for every class
    settings: Settings = field(default_factory=Settings)


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
             and p.suffix.lower() in SUFFIXES and p.stat().st_size <= MAX_FILE_BYTES]
    return found[:MAX_FILES]


def load_spec(assignment_dir: Path, raw: dict | None) -> Spec:
    """The spec of the assignment in ``assignment_dir`` (``raw``: its ``assignment.json``)."""
    block = (raw or {}).get("similarity") or {}
    kind = block.get("kind") if block.get("kind") in ("code", "annotations") else "code"
    names = block.get("boilerplate") or ["starter", "solution"]
    texts = []
    for name in names:
        folder = (assignment_dir / str(name)).resolve()
        if assignment_dir.resolve() not in folder.parents:
            continue  # a boilerplate entry points inside the assignment folder, nowhere else
        texts += [extract(p.name, p.read_bytes()) for p in _files(folder)]
    public = [p.read_text() for p in _files(PUBLIC / kind)] if block.get("public", True) is not False else []
    return Spec(kind=kind, boilerplate=texts, public=public, settings=Settings.from_dict(block, kind))


def excluded(spec: Spec) -> list[str]:
    """Every text whose code never counts as a student's own: the assignment's and the public ones."""
    return spec.boilerplate + spec.public


def corpus_docs(corpus_dir: str | Path | None, assignment_id: str) -> list[Doc]:
    """An earlier term's submissions of this assignment as reference documents (keys ``ref:<path>``)."""
    if not corpus_dir:
        return []
    root = Path(corpus_dir) / assignment_id
    return [Doc(f"ref:{p.relative_to(root)}", extract(p.name, p.read_bytes()), label=str(p.relative_to(root)),
                reference=True) for p in _files(root)]


def corpus_text(corpus_dir: str | Path | None, assignment_id: str, rel: str) -> str | None:
    """The text of one corpus document for the side-by-side view; None if it is not in the corpus."""
    if not corpus_dir:
        return None
    root = (Path(corpus_dir) / assignment_id).resolve()
    path = (root / rel).resolve()
    if root not in path.parents or path not in _files(root):
        return None
    return extract(path.name, path.read_bytes())
