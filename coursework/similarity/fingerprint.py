"""Normalised tokens and winnowed fingerprints (Schleimer, Wilkerson and Aiken, SIGMOD 2003).

Why not copydetect (0.5.0, installs from the local index): measured on the samples with its
defaults (k = 25 characters, window 1) and the starter and solution as boilerplate, it caught
renaming, reordering, comments and dead code (0.88-1.0 of the smaller file), but two students who
adapted one public tutorial scored 0.44 while independent solutions reached 0.55 (0.88 by the larger
fraction): no threshold finds the one without the other. It maps every name, API attributes
included, to ``V`` and compares characters of that text, so PyTorch scripts look alike everywhere
(``V.V(V.V(V,V))``); it also pulls matplotlib in and hashes with Python's salted ``hash``. Here a
name is normalised only where the student chose it (bound in the file: assigned, defined, a
parameter, an import alias); an API name (``DistributedSampler``, ``set_epoch``) is kept, since
renaming cannot touch it. Numbers and strings become ``N`` and ``S`` (changed constants and
messages are the cheapest disguise), comments, docstrings and blank lines vanish, and a k-gram
counts tokens, not characters. ``bench/similarity.py --copydetect`` compares the speed.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import io
import keyword
import re
import tokenize
from typing import NamedTuple

MAX_TOKENS = 20_000  # bounded work per document whatever is uploaded (homework 1 is ~1,500)


class Token(NamedTuple):
    """One normalised token and where it came from (character offsets into the text)."""

    norm: str
    start: int
    end: int


_BUILTINS = frozenset(dir(builtins))
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_STRUCT = {tokenize.NEWLINE: ";", tokenize.INDENT: "{", tokenize.DEDENT: "}"}


def bound_names(text: str, tree: ast.AST | None = None) -> set[str] | None:
    """Names the file itself binds (so a student may rename them). A file that does not parse is
    read top-level block by block, and a block that does not parse by a few patterns; None only
    when nothing could be read."""
    tree = tree if tree is not None else _parse(text)
    if tree is not None:
        return _bound_in(tree) - _BUILTINS
    names: set[str] = set()
    blocks = re.split(r"\n(?=(?:async\s+def|def|class|@|import|from|if)\b)", text)
    for block in blocks:
        sub = _parse(block)
        names |= _bound_in(sub) if sub is not None else _bound_by_patterns(block)
    return (names - _BUILTINS - set(keyword.kwlist)) or None


_NAMED = re.compile(r"\b(?:def|class|as|for)\s+([A-Za-z_]\w*)")
_PARAMS = re.compile(r"\bdef\s+\w+\s*\(([^)]*)")
_TARGETS = re.compile(r"^\s*([A-Za-z_][\w\s,.*\[\]]*?)\s*(?:[-+*/%&|^@]|//|\*\*)?=(?!=)", re.M)
_WORDS = re.compile(r"(?<![\w.])[A-Za-z_]\w*|(?<=\.)[A-Za-z_]\w*(?=\s*(?:,|$))")


def _bound_by_patterns(block: str) -> set[str]:
    """What a block that does not parse seems to bind: definitions, ``as`` and ``for`` targets,
    parameters and the targets of assignments at the start of a line (never keyword arguments)."""
    names = set(_NAMED.findall(block))
    for params in _PARAMS.findall(block):
        names.update(m.group(1) for m in re.finditer(r"(?:^|,)\s*\**([A-Za-z_]\w*)", params))
    for targets in _TARGETS.findall(block):
        names.update(_WORDS.findall(targets))
    return names


def _parse(text: str) -> ast.AST | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _bound_in(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)  # self.layer1 = ...: the student's own attribute
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _line_starts(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def code_tokens(text: str) -> list[Token]:
    """Python tokens with the student's names, numbers and strings normalised (see module doc)."""
    tree = _parse(text)
    if tree is None:  # a syntax error may still be a copy: read it with the bad lines blanked
        text = repair(text) or text
    bound = bound_names(text, tree)
    starts = _line_starts(text)
    out: list[Token] = []
    prev = ";"
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _fallback_tokens(text)
    for i, t in enumerate(toks):
        if t.type in _SKIP or len(out) >= MAX_TOKENS:
            continue
        start = starts[t.start[0] - 1] + t.start[1] if t.start[0] - 1 < len(starts) else len(text)
        end = starts[t.end[0] - 1] + t.end[1] if t.end[0] - 1 < len(starts) else len(text)
        if t.type in _STRUCT:
            norm = _STRUCT[t.type]
        elif t.type == tokenize.STRING:
            nxt = next((u for u in toks[i + 1:] if u.type not in _SKIP), None)
            if prev in (";", "{", "}") and (nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
                continue  # a docstring (or a bare string statement): a comment in all but name
            norm = "S"
        elif t.type == tokenize.NUMBER:
            norm = "N"
        elif t.type == tokenize.NAME:
            norm = _name(t.string, bound, prev == ".")
        else:
            norm = t.string
        if norm == ";" and prev in (";", "{", "}"):
            continue
        out.append(Token(norm, start, end))
        prev = norm
    return out


def _name(name: str, bound: set[str] | None, attribute: bool) -> str:
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return name
    if bound is None:  # unparsable: every name but builtins and attributes counts as chosen
        return name if (attribute or name in _BUILTINS) else "V"
    return "V" if name in bound else name


_FALLBACK = re.compile(r"#[^\n]*|(?:[rRbBuUfF]{1,2})?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"[^\"\n]*\"|'[^'\n]*')|"
                       r"[A-Za-z_]\w*|(?:\d[\d_]*\.?[\d_]*|\.\d+)(?:[eE][-+]?\d+)?[jJ]?|"
                       r"\*\*=?|//=?|>>=?|<<=?|->|[-+*/%&|^@<>=!:]=|\S")


def _fallback_tokens(text: str) -> list[Token]:
    """A tokenizer for text neither Python nor ``repair`` can read: names, numbers, strings and
    operators, without the structure tokens (rare: the copy is then found on its lines alone)."""
    bound = bound_names(text)
    out: list[Token] = []
    for m in _FALLBACK.finditer(text):
        tok = m.group()
        if tok.startswith("#"):
            continue
        norm = ("S" if tok[-1] in "\"'" else "N" if tok[0].isdigit() or tok[0] == "." and len(tok) > 1 else
                _name(tok, bound, bool(out) and out[-1].norm == ".") if tok[0].isalpha() or tok[0] == "_" else tok)
        out.append(Token(norm, m.start(), m.end()))
        if len(out) >= MAX_TOKENS:
            break
    return out


def repair(text: str, tries: int = 20) -> str | None:
    """The text with the lines Python reports as syntax errors blanked (``pass``, or ``if 1:``
    for a line that opens a block), every offset kept; None if it still does not parse."""
    lines = text.splitlines(keepends=True)
    for _ in range(tries):
        try:
            ast.parse("".join(lines))
            return "".join(lines)
        except (SyntaxError, ValueError) as err:
            n = (getattr(err, "lineno", None) or 0) - 1
        except (RecursionError, MemoryError):
            return None
        if not 0 <= n < len(lines):
            return None
        body = lines[n].rstrip("\r\n")
        indent = len(body) - len(body.lstrip())
        stub = "if 1:" if body.rstrip().endswith(":") else "pass"
        new = (" " * indent + stub) if len(body) >= indent + len(stub) else ""
        lines[n] = new.ljust(len(body)) + lines[n][len(body):]
    return None


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*|\d+(?:\.\d+)?|[\u3400-\u9fff]")
_COMMENT_START = re.compile(r"(?:^|(?<=[\s,{\[]))(#|//)")


def comment_spans(text: str) -> list[tuple[int, int]]:
    """Where the ``#`` / ``//`` comments of a config (or of code cells) are, outside quotes."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote and line[i - 1] != "\\":
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch in "#/" and _COMMENT_START.match(line, i):
                spans.append((pos + i, pos + len(line.rstrip("\n"))))
                break
        pos += len(line)
    return spans


def annotation_tokens(text: str) -> list[Token]:
    """Words of the comments only: lower-cased English words, numbers, single CJK characters."""
    out: list[Token] = []
    for start, end in comment_spans(text):
        for m in _WORD.finditer(text, start, end):
            out.append(Token(m.group().lower(), m.start(), m.end()))
            if len(out) >= MAX_TOKENS:
                return out
    return out


def tokens_for(kind: str, text: str) -> list[Token]:
    """The tokens of one document of an assignment of this similarity kind."""
    return annotation_tokens(text) if kind == "annotations" else code_tokens(text)


def kgram_hashes(tokens: list[Token], k: int) -> list[int]:
    """A 64-bit hash of every run of ``k`` consecutive normalised tokens. Stable across processes
    (Python's ``hash`` is salted per process, and winnowing keeps the smallest hashes, so a salted
    hash would pick other fingerprints, and other candidate pairs, in every run)."""
    norms = [t.norm for t in tokens]
    return [int.from_bytes(hashlib.blake2b("\x1f".join(norms[i:i + k]).encode(), digest_size=8).digest(), "big")
            for i in range(len(norms) - k + 1)]


def winnow(hashes: list[int], window: int) -> dict[int, list[int]]:
    """Robust winnowing: in every window of ``window`` hashes the smallest (rightmost on a tie)
    is kept, so any shared run of ``window + k - 1`` tokens shares at least one fingerprint.
    Returns hash -> the k-gram positions it was selected at."""
    chosen: dict[int, list[int]] = {}
    if len(hashes) < window:  # a short document: all of it
        for i, h in enumerate(hashes):
            chosen.setdefault(h, []).append(i)
        return chosen
    last = -1
    for w in range(len(hashes) - window + 1):
        win = hashes[w:w + window]
        low = min(win)
        pos = w + window - 1 - win[::-1].index(low)
        if pos != last:
            chosen.setdefault(low, []).append(pos)
            last = pos
    return chosen
