"""The self-contained HTML page: Markdown of the reports, figures embedded."""

from __future__ import annotations

import base64
from pathlib import Path

from fabricsim.reports.html import markdown_to_html, sections, write_html

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5"
    "ErkJggg==")


def test_page_embeds_figures_and_escapes_text(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    md = tmp_path / "r.md"
    md.write_text("# Report <x>\n\n## 1. First\n\nSome `a<b>` and **bold** text,\n"
                  "continued.\n\n![a figure](a.png)\n\n## 2. Second\n\n| k | v |\n|---|---|\n"
                  "| `x` | 1 & 2 |\n\n- one\n- two\n\n![gone](missing.png)\n", encoding="utf-8")
    page = write_html(md).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Report &lt;x&gt;</title>" in page
    assert "<code>a&lt;b&gt;</code>" in page and "<strong>bold</strong>" in page
    assert "Some <code>a&lt;b&gt;</code> and <strong>bold</strong> text, continued." in page
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page
    assert "<td><code>x</code></td><td>1 &amp; 2</td>" in page
    assert "<ul><li>one</li><li>two</li></ul>" in page
    assert "missing figure: missing.png" in page
    # a table of contents links the sections
    assert '<a href="#1-first">1. First</a><a href="#2-second">2. Second</a>' in page
    assert "http" not in page


def test_sections() -> None:
    assert sections("# t\n## 1. a\ntext ## not\n## b\n") == ["1. a", "b"]


def test_separator_rows_are_not_cells(tmp_path: Path) -> None:
    page = markdown_to_html("| a |\n|---|\n| 1 |\n", tmp_path)
    assert "---" not in page and "<th>a</th>" in page and '<td class="n">1</td>' in page


def test_tags_balance(tmp_path: Path) -> None:
    from html.parser import HTMLParser

    (tmp_path / "a.png").write_bytes(PNG)
    page = markdown_to_html("# T\n\n## 1. A\n\n| `a|b` |\n|---|\n| **x** |\n\n![f](a.png)\n\n"
                            "- `y`\n\ntext [link](#t)\n", tmp_path)

    class Balance(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []
            self.bad: list[str] = []

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag not in ("img", "meta"):
                self.open.append(tag)

        def handle_endtag(self, tag: str) -> None:
            if self.open and self.open[-1] == tag:
                self.open.pop()
            else:
                self.bad.append(tag)

    b = Balance()
    b.feed(page)
    assert b.bad == [] and b.open == []
    assert '<a href="#t">link</a>' in page
