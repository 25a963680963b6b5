"""A tiny, safe Markdown subset for assignment specs: no dependency, no raw HTML.

Everything is escaped first; only headings, paragraphs, lists, pipe tables, fenced
code, inline code, bold, italics and http(s)/relative links are turned into tags. Anything else
shows as the text it is, which is the right failure for a spec.
"""
from __future__ import annotations

import re

from markupsafe import Markup, escape

_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")
_BULLET = re.compile(r"^\s*[-*]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?!\s)([^*]+?)(?<!\s)\*(?![*\w])")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_LINK = re.compile(r"\[([^\]]+)\]\(((?:https?://|/|#)[^)\s]*)\)")


def inline(text: str) -> str:
    """Escape one line and apply inline code, bold and links (code spans are left untouched)."""
    parts = []
    for i, chunk in enumerate(re.split(r"(`[^`]+`)", text)):
        if i % 2:
            parts.append(f"<code>{escape(chunk[1:-1])}</code>")
            continue
        s = str(escape(chunk))
        s = _BOLD.sub(r"<strong>\1</strong>", s)
        s = _ITALIC.sub(r"<em>\1</em>", s)
        s = _LINK.sub(r'<a href="\2">\1</a>', s)  # \2 is already escaped and scheme-checked
        parts.append(s)
    return "".join(parts)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table(rows: list[str]) -> str:
    """A pipe table; the row after the header must be the ``|---|`` rule, else it stays text."""
    if len(rows) < 2 or not _TABLE_RULE.match(rows[1].strip()):
        return "<p>" + " ".join(inline(r) for r in rows) + "</p>"
    head = "".join(f'<th scope="col">{inline(c)}</th>' for c in _cells(rows[0]))
    body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows[2:])
    return f'<div class="table-scroll"><table class="table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render(source: str) -> Markup:
    """Render the Markdown subset to HTML that is safe to embed in a page."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    rows: list[str] = []
    list_tag = ""
    code: list[str] | None = None

    def flush() -> None:
        nonlocal list_tag
        if rows:
            out.append(table(rows))
            rows.clear()
        if para:
            out.append("<p>" + " ".join(inline(p) for p in para) + "</p>")
            para.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{inline(i)}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    for line in source.splitlines():
        if code is not None:
            if line.strip().startswith("```"):
                out.append("<pre><code>" + str(escape("\n".join(code))) + "</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        if line.strip().startswith("```"):
            flush()
            code = []
        elif not line.strip():
            flush()
        elif line.lstrip().startswith("|"):
            if para or items:
                flush()
            rows.append(line)
        elif m := _HEADING.match(line):
            flush()
            level = len(m.group(1)) + 1  # the page title is the h1
            out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
        elif (m := _BULLET.match(line)) or (m2 := _NUMBERED.match(line)):
            tag = "ul" if m else "ol"
            if para or (items and list_tag != tag):
                flush()
            list_tag = tag
            items.append((m or m2).group(1))
        elif items and line.startswith("  "):
            items[-1] += " " + line.strip()  # a wrapped list item
        else:
            if items or rows:
                flush()
            para.append(line.strip())
    if code is not None:  # an unclosed fence still shows its code
        out.append("<pre><code>" + str(escape("\n".join(code))) + "</code></pre>")
    flush()
    return Markup("\n".join(out))
