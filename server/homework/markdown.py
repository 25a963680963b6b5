"""A tiny, safe Markdown subset for assignment specs: no dependency, no raw HTML.

Everything is escaped first; only headings, paragraphs, lists, fenced code,
inline code, bold and http(s)/relative links are turned into tags. Anything else
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
        s = _LINK.sub(r'<a href="\2">\1</a>', s)  # \2 is already escaped and scheme-checked
        parts.append(s)
    return "".join(parts)


def render(source: str) -> Markup:
    """Render the Markdown subset to HTML that is safe to embed in a page."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""
    code: list[str] | None = None

    def flush() -> None:
        nonlocal list_tag
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
            if items:
                flush()
            para.append(line.strip())
    if code is not None:  # an unclosed fence still shows its code
        out.append("<pre><code>" + str(escape("\n".join(code))) + "</code></pre>")
    flush()
    return Markup("\n".join(out))
