"""Read an annotated config (YAML with ``#`` comments or JSON with ``//`` / ``/* */`` comments).

The result keeps every key path with its value, line and the comment that annotates it:
the comment on the key's own line plus the full-line comments directly above it. YAML goes
through ruamel.yaml, whose comment tokens say where each comment starts, so a ``#`` inside a
quoted string is never mistaken for one. JSON comments are blanked out by a scanner that
knows string literals (``"https://x"`` stays intact) before ``json.loads`` reads the values.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError


class ConfigSyntaxError(ValueError):
    """The text is not valid YAML / JSON; ``line`` is 1-based (0 when unknown)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


@dataclass
class Field:
    """One key of the config: dotted path, value, 1-based line and its annotation."""

    path: str
    value: Any
    line: int
    comment: str = ""

    @property
    def is_block(self) -> bool:
        return isinstance(self.value, dict)


@dataclass
class ParsedConfig:
    """A parsed config: plain data plus every key path in file order."""

    format: str  # "yaml" or "json"
    data: Any
    fields: dict[str, Field] = field(default_factory=dict)

    def annotation(self, path: str) -> str:
        f = self.fields.get(path)
        return f.comment if f else ""


def parse(text: str, filename: str) -> ParsedConfig:
    """Parse by extension: ``.json`` as JSON with comments, anything else as YAML."""
    if filename.lower().endswith(".json"):
        return parse_json(text)
    return parse_yaml(text)


# ---------------------------------------------------------------- YAML

def _plain(node: Any) -> Any:
    if isinstance(node, CommentedMap):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [_plain(v) for v in node]
    if node is not None and type(node).__module__.startswith("ruamel"):
        # ScalarFloat, ScalarBoolean, quoted strings ...: their builtin base type
        for base in (bool, int, float, str):
            if isinstance(node, base):
                return base(node)
    return node


def _comment_tokens(node: Any, out: list) -> None:
    """Collect every CommentToken ruamel attached anywhere in the tree."""
    ca = getattr(node, "ca", None)
    if ca is not None:
        for tok in (ca.comment or []):
            for t in (tok if isinstance(tok, list) else [tok]):
                if t is not None:
                    out.append(t)
        for slots in ca.items.values():
            for tok in slots:
                for t in (tok if isinstance(tok, list) else [tok]):
                    if t is not None:
                        out.append(t)
    if isinstance(node, dict):
        for v in node.values():
            _comment_tokens(v, out)
    elif isinstance(node, list):
        for v in node:
            _comment_tokens(v, out)


def _yaml_comment_lines(root: Any, lines: list[str]) -> dict[int, tuple[bool, str]]:
    """0-based line -> (is full-line comment, text without ``#``).

    Inline comments come from the tokens' start marks. A token's later lines (and its
    leading blank lines) carry no reliable position, so full-line comments are the raw lines
    starting with ``#`` whose text the parser did report as a comment (a ``#`` line inside a
    block scalar is not one)."""
    tokens: list = []
    _comment_tokens(root, tokens)
    texts: set[str] = set()
    found: dict[int, tuple[bool, str]] = {}
    for tok in tokens:
        parts = tok.value.split("\n")
        texts.update(p.strip() for p in parts if p.strip().startswith("#"))
        line, col = tok.start_mark.line, tok.start_mark.column
        first = parts[0].strip()
        if first.startswith("#") and line < len(lines) and lines[line][:col].strip():
            found[line] = (False, first.lstrip("#").strip())
    for n, raw in enumerate(lines):
        stripped = raw.strip()
        if stripped.startswith("#") and stripped in texts and n not in found:
            found[n] = (True, stripped.lstrip("#").strip())
    return found


def _walk_yaml(node: CommentedMap, prefix: str, out: dict[str, Field]) -> None:
    for key, value in node.items():
        path = f"{prefix}{key}"
        line, _col = node.lc.key(key)
        out[path] = Field(path=path, value=_plain(value), line=line + 1)
        if isinstance(value, CommentedMap):
            _walk_yaml(value, path + ".", out)


def parse_yaml(text: str) -> ParsedConfig:
    """Parse YAML keeping each key's annotation."""
    try:
        root = YAML(typ="rt").load(io.StringIO(text))
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        raise ConfigSyntaxError(str(getattr(e, "problem", None) or e).strip(),
                                mark.line + 1 if mark else 0) from None
    parsed = ParsedConfig(format="yaml", data=_plain(root))
    if not isinstance(root, CommentedMap):
        return parsed
    _walk_yaml(root, "", parsed.fields)
    lines = text.splitlines()
    _attach(parsed.fields, _yaml_comment_lines(root, lines), lines)
    return parsed


def _attach(fields: dict[str, Field], comments: dict[int, tuple[bool, str]], lines: list[str]) -> None:
    """Give each key its inline comment plus the block of full-line comments right above it."""
    for f in fields.values():
        n = f.line - 1
        above: list[str] = []
        k = n - 1
        while k >= 0 and k in comments and comments[k][0]:
            above.insert(0, comments[k][1])
            k -= 1
        inline = comments.get(n)
        parts = above + ([inline[1]] if inline and not inline[0] else [])
        f.comment = " ".join(p for p in parts if p).strip()


# ---------------------------------------------------------------- JSON with comments

def strip_json_comments(text: str) -> tuple[str, dict[int, tuple[bool, str]]]:
    """Blank out ``//`` and ``/* */`` comments outside strings, keeping every offset.

    Returns the clean text and 0-based line -> (is full-line comment, text).
    """
    out = list(text)
    comments: dict[int, tuple[bool, str]] = {}
    i, n, line, line_start = 0, len(text), 0, 0
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
            elif c == "\n":  # JSON forbids raw newlines in strings; json.loads will say so
                in_string = False
                line, line_start = line + 1, i + 1
            i += 1
            continue
        if c == '"':
            in_string = True
        elif c == "\n":
            line, line_start = line + 1, i + 1
        elif text.startswith("//", i) or text.startswith("/*", i):
            block = text[i + 1] == "*"
            end = text.find("*/", i + 2) if block else text.find("\n", i)
            if end == -1:
                if block:
                    raise ConfigSyntaxError("unterminated /* comment", line + 1)
                end = n
            stop = end + 2 if block else end
            body = text[i + 2:end].strip().strip("*").strip()
            full = text[line_start:i].strip() == ""
            prev = comments.get(line)
            comments[line] = (full and not (prev and not prev[0]),
                              f"{prev[1]} {body}".strip() if prev else body)
            for j in range(i, stop):
                if out[j] != "\n":
                    out[j] = " "
            for extra in range(1, text.count("\n", i, stop) + 1):  # a block comment's later lines
                comments[line + extra] = (True, "")
            line += text.count("\n", i, stop)
            if text.count("\n", i, stop):
                line_start = text.rfind("\n", i, stop) + 1
            i = stop
            continue
        i += 1
    return "".join(out), comments


def _json_key_lines(clean: str) -> dict[str, int]:
    """Dotted key path -> 1-based line, read with a tiny tokenizer over comment-free JSON."""
    lines: dict[str, int] = {}
    stack: list[list[Any]] = []  # [kind, current key]
    i, n, line = 0, len(clean), 1
    expect_key = False
    while i < n:
        c = clean[i]
        if c == "\n":
            line += 1
        elif c == "{":
            stack.append(["obj", None])
            expect_key = True
        elif c == "[":
            stack.append(["arr", None])
        elif c in "}]":
            if stack:
                stack.pop()
        elif c == ",":
            expect_key = bool(stack) and stack[-1][0] == "obj"
        elif c == '"':
            j = i + 1
            while j < n and clean[j] != '"':
                j += 2 if clean[j] == "\\" else 1
            if expect_key and stack and stack[-1][0] == "obj":
                try:
                    key = json.loads(clean[i:j + 1])
                except ValueError:
                    key = clean[i + 1:j]
                stack[-1][1] = key
                if all(s[0] == "obj" for s in stack):
                    lines[".".join(str(s[1]) for s in stack)] = line
                expect_key = False
            i = j
        i += 1
    return lines


def _walk_json(node: dict, prefix: str, key_lines: dict[str, int], out: dict[str, Field]) -> None:
    for key, value in node.items():
        path = f"{prefix}{key}"
        out[path] = Field(path=path, value=value, line=key_lines.get(path, 0))
        if isinstance(value, dict):
            _walk_json(value, path + ".", key_lines, out)


def parse_json(text: str) -> ParsedConfig:
    """Parse JSON whose fields may carry ``//`` or ``/* */`` annotations."""
    clean, comments = strip_json_comments(text)
    try:
        data = json.loads(clean)
    except json.JSONDecodeError as e:
        raise ConfigSyntaxError(e.msg, e.lineno) from None
    parsed = ParsedConfig(format="json", data=data)
    if isinstance(data, dict):
        _walk_json(data, "", _json_key_lines(clean), parsed.fields)
        _attach(parsed.fields, comments, clean.splitlines())
    return parsed
