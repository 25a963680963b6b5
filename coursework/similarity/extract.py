"""What of an upload is compared: the text a person wrote, decoded, bounded, never executed.

Two kinds (``assignment.json`` ``"similarity": {"kind": ...}``):

* ``code``: a Python script as it is; a notebook's code cells joined (markdown and outputs are
  not code, and outputs would make two runs of one notebook look alike).
* ``annotations``: homework 2's configs, where every student copies the same keys and values
  from the example configs; only the comments (``#`` and ``//``) are the student's own. The whole
  text is kept (so highlights can point into it) and ``fingerprint.annotation_tokens`` reads only
  the comments.
"""
from __future__ import annotations

import json

MAX_CHARS = 400_000  # an upload is at most 2 MiB; beyond this a file is cut, never parsed further
CELL_MARK = "# ---- cell {n} ----\n"  # a comment: never a token, so cell boundaries change nothing


def decode(data: bytes) -> str:
    """UTF-8 text (a BOM dropped, undecodable bytes replaced), at most ``MAX_CHARS``."""
    return data.decode("utf-8-sig", errors="replace")[:MAX_CHARS].replace("\r\n", "\n")


def notebook_code(text: str) -> str:
    """The code cells of a notebook, each under a cell mark; "" if it is not a notebook."""
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return ""
    out = []
    for n, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else str(src)
        out.append(CELL_MARK.format(n=n) + src.rstrip("\n") + "\n")
    return "".join(out)[:MAX_CHARS]


def extract(filename: str, data: bytes) -> str:
    """The text of an upload that similarity reads (see the module docstring)."""
    text = decode(data)
    if filename.lower().endswith(".ipynb"):
        return notebook_code(text)
    return text
