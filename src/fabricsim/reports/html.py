"""Reports as one self-contained HTML page: the Markdown reports fabricsim writes, with
their PNGs embedded (base64), so the page opens anywhere without network access.

Only the Markdown that fabricsim's own reports use is understood: ``#`` headings,
paragraphs, pipe tables, bullet lists (``- ``), images on a line of their own
(``![alt](file.png)``), and inline ``code``, ``**bold**`` and ``[text](link)``.

Example
-------
>>> import tempfile, pathlib
>>> page = markdown_to_html("# Title\\n\\nA `flag` and **this**.\\n\\n| a | b |\\n|---|---|\\n"
...                         "| 1 | 2 |\\n", pathlib.Path(tempfile.mkdtemp()))
>>> "<h1 id=\\"title\\">Title</h1>" in page, "<code>flag</code>" in page
(True, True)
>>> '<td class="n">2</td>' in page  # numbers are right-aligned
True
>>> sections("# R\\n## 1. The cluster\\ntext\\n## 2. Faults\\n")
['1. The cluster', '2. Faults']
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["markdown_to_html", "sections", "write_html"]

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em;border-bottom:2px solid #ddd;padding-bottom:.2em}
h2{font-size:1.35em;margin-top:1.8em;border-bottom:1px solid #eee}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}
code{background:#f1f1f1;padding:0 .25em;border-radius:3px;font-size:.92em}
img{max-width:100%;height:auto;display:block;margin:.8em 0;border:1px solid #eee}
nav{background:#f7f7f7;padding:.5em 1em;border-radius:4px}
nav a{margin-right:1em}
td.n{text-align:right;font-variant-numeric:tabular-nums}
"""

#: A cell that reads as a number (with a currency, sign or unit): right-aligned.
_NUMBER = re.compile(r"[$×+\-]?[\d][\d,.]*( ?[%×]|[ µ]?[a-zA-Z/]{1,4}|M)?")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _inline(text: str) -> str:
    """Escape ``text`` and render inline code, bold and links."""
    parts = re.split(r"(`[^`]*`)", text)
    out: list[str] = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', s)
        out.append(s)
    return "".join(out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _image(alt: str, src: str, folder: Path) -> str:
    p = folder / src
    if not p.is_file():
        return f"<p><em>missing figure: {html.escape(src)}</em></p>"
    data = base64.b64encode(p.read_bytes()).decode("ascii")
    return (f'<img alt="{html.escape(alt)}" title="{html.escape(src)}" '
            f'src="data:image/png;base64,{data}">')


def sections(markdown: str) -> list[str]:
    """The ``##`` section titles of a Markdown report, in order."""
    return [m.group(1).strip() for m in re.finditer(r"^## (.+)$", markdown, re.M)]


def markdown_to_html(markdown: str, folder: Path, *, title: str = "") -> str:
    """One HTML page from ``markdown``; images are read from ``folder`` and embedded."""
    lines = markdown.splitlines()
    body: list[str] = []
    para: list[str] = []
    heads = sections(markdown)

    def flush() -> None:
        if para:
            body.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        img = re.fullmatch(r"!\[([^\]]*)\]\(([^)\s]+)\)", line.strip())
        head = re.match(r"^(#{1,4}) (.+)$", line)
        if not line.strip():
            flush()
        elif head:
            flush()
            level, text = len(head.group(1)), head.group(2).strip()
            body.append(f'<h{level} id="{_slug(text)}">{_inline(text)}</h{level}>')
            if level == 1 and len(heads) > 1:
                body.append("<!--nav-->")
        elif img:
            flush()
            body.append(_image(img.group(1), img.group(2), folder))
        elif line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            body.append(_table(rows))
            continue
        elif line.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:].strip())}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
            continue
        else:
            para.append(line.strip())
        i += 1
    flush()
    nav = "<nav>" + "".join(f'<a href="#{_slug(h)}">{html.escape(h)}</a>'
                            for h in heads) + "</nav>"
    text = "\n".join(body).replace("<!--nav-->", nav, 1)
    name = title or next((m.group(1) for m in re.finditer(r"^# (.+)$", markdown, re.M)),
                         "fabricsim report")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(name)}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n{text}\n</body></html>\n")


def _table(rows: list[str]) -> str:
    head = _cells(rows[0])
    body = [r for r in rows[1:] if not re.fullmatch(r"\|?[\s:|-]+\|?", r.strip())]
    out = ["<table><thead><tr>", *(f"<th>{_inline(c)}</th>" for c in head), "</tr></thead>",
           "<tbody>"]
    for r in body:
        out.append("<tr>" + "".join(
            f'<td class="n">{_inline(c)}</td>' if _NUMBER.fullmatch(c) else
            f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def write_html(markdown_path: str | Path, html_path: str | Path | None = None) -> Path:
    """Render the Markdown report at ``markdown_path`` (images beside it) as one HTML file
    (default: the same name with ``.html``); returns its path."""
    src = Path(markdown_path)
    dst = Path(html_path) if html_path is not None else src.with_suffix(".html")
    page = markdown_to_html(src.read_text(encoding="utf-8"), src.parent)
    dst.write_text(page, encoding="utf-8")
    return dst
