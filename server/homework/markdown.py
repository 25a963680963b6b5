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


def _spans(text: str) -> str:
    """Escape text and apply inline code, bold and italics (no links)."""
    parts = []
    for i, chunk in enumerate(re.split(r"(`[^`]+`)", text)):
        if i % 2:
            parts.append(f"<code>{escape(chunk[1:-1])}</code>")
            continue
        s = str(escape(chunk))
        s = _BOLD.sub(r"<strong>\1</strong>", s)
        s = _ITALIC.sub(r"<em>\1</em>", s)
        parts.append(s)
    return "".join(parts)


def inline(text: str) -> str:
    """Escape one line and apply links (whose text may hold code spans), inline code, bold and italics."""
    out, pos = [], 0
    for m in _LINK_RAW.finditer(text):
        out.append(_spans(text[pos:m.start()]))
        out.append(f'<a href="{escape(m.group(2))}">{_spans(m.group(1))}</a>')  # scheme checked by the pattern
        pos = m.end()
    out.append(_spans(text[pos:]))
    return "".join(out)


_LINK_RAW = re.compile(r"\[([^\]]+)\]\(((?:https?://|/|#)[^)\s]*)\)")
_OTHER_README = re.compile(r"^\s*\*?[^\n]*\[[^\]]*\]\(README[\w.]*\.md\)[^\n]*$")
_LANG_HEADING = re.compile(r"^##\s+(中文|English)\s*$")


def for_language(source: str, lang: str) -> str:
    """The part of a spec for one language: in a bilingual file with "## 中文" and "## English"
    sections, the preamble plus that section (its "##" headings kept); the file's own "# title"
    and lines pointing at the other language's README are dropped (the page has both)."""
    lines = [ln for ln in source.splitlines() if not _OTHER_README.match(ln)]
    marks = [(i, m.group(1)) for i, ln in enumerate(lines) if (m := _LANG_HEADING.match(ln))]
    want = "中文" if lang == "zh" else "English"
    if len({name for _, name in marks}) == 2:
        start = next(i for i, name in marks if name == want)
        end = next((i for i, _ in marks if i > start), len(lines))
        lines = lines[:marks[0][0]] + lines[start + 1:end]
    return "\n".join(ln for ln in lines if not re.match(r"^#\s", ln))


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

    indented: list[str] | None = None  # an indented code block (4 spaces after a blank line)

    def close_indented() -> None:
        nonlocal indented
        if indented is not None:
            while indented and not indented[-1].strip():
                indented.pop()
            out.append("<pre><code>" + str(escape("\n".join(indented))) + "</code></pre>")
            indented = None

    for line in source.splitlines():
        if indented is not None and line.strip() and not line.startswith("    "):
            close_indented()
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
        elif indented is not None and (line.startswith("    ") or not line.strip()):
            indented.append(line[4:])
        elif line.startswith("    ") and not para and not items and not rows:
            flush()
            indented = [line[4:]]
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
    close_indented()
    flush()
    return Markup("\n".join(out))
