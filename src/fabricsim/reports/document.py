"""A report being written: its folder, its Markdown lines, progress and a time limit.

Sections append Markdown (:meth:`Doc.add`, :meth:`Doc.table`, :meth:`Doc.figure`);
:meth:`Doc.write` saves ``report.md`` and the self-contained ``report.html``
(:mod:`fabricsim.reports.html`) and lists every file written with its size.

Example
-------
>>> import tempfile
>>> doc = Doc(Path(tempfile.mkdtemp()))
>>> doc.add("# Title", "")
>>> doc.table(["a", "b"], [[1, 2]])
>>> files = doc.write()
>>> files.html.name, files.sections
('report.html', [])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabricsim.errors import SimulationError

__all__ = ["Doc", "ReportFiles"]


@dataclass(frozen=True)
class ReportFiles:
    """What a report wrote: the HTML and Markdown pages, its sections, and every file
    with its size in bytes."""

    html: Path
    markdown: Path
    sections: list[str]
    files: dict[Path, int]

    def total_bytes(self) -> int:
        return sum(self.files.values())

    def describe(self) -> str:
        """``"7 files, 1.2 MiB"``."""
        from fabricsim.reports.flow import human_size

        return f"{len(self.files)} files, {human_size(self.total_bytes())}"


@dataclass
class Doc:
    """A report under construction in folder ``out``."""

    out: Path
    lines: list[str] = field(default_factory=list)
    progress: Callable[[str], None] = lambda msg: None
    deadline: float | None = None
    written: list[Path] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def heading(self, title: str) -> None:
        """A numbered section heading (``## 3. title``) and a blank line."""
        n = sum(1 for line in self.lines if line.startswith("## ")) + 1
        self.add(f"## {n}. {title}", "")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """A Markdown table and a blank line."""
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(str(c) for c in r) + " |" for r in rows))
        self.add("")

    def figure(self, path: Path, alt: str) -> None:
        """Reference a PNG written into the report's folder."""
        self.written.append(path)
        self.add(f"![{alt}]({path.relative_to(self.out).as_posix()})", "")

    def step(self, what: str) -> None:
        """Report progress, and stop if the time limit has passed."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise SimulationError(f"the report did not finish within the time limit "
                                  f"(stopped before: {what}); raise --time-limit",
                                  field="--time-limit")
        self.progress(what)

    def time_left(self) -> float | None:
        if self.deadline is None:
            return None
        return max(self.deadline - time.perf_counter(), 1e-3)

    def deadline_allows(self, seconds: float) -> bool:
        """Whether ``seconds`` more fit before the time limit (always without one)."""
        left = self.time_left()
        return left is None or left > seconds

    def write(self, stem: str = "report", *, list_files: bool = True) -> ReportFiles:
        """Save ``<stem>.md`` and ``<stem>.html``; the file list covers every figure and
        table written (with ``list_files``, the report ends with a table of them)."""
        from fabricsim.reports.flow import human_size
        from fabricsim.reports.html import sections, write_html

        self.out.mkdir(parents=True, exist_ok=True)
        have = [p for p in dict.fromkeys(self.written) if p.exists()]
        if list_files and have:
            total = sum(p.stat().st_size for p in have)
            self.add("## Files written", "",
                     f"Beside this report in `{self.out.as_posix()}` ({len(have)} files, "
                     f"{human_size(total)}; `{stem}.html` embeds the figures, "
                     f"`{stem}.md` links them):", "")
            self.table(["file", "size"], [[f"`{p.relative_to(self.out).as_posix()}`",
                                           human_size(p.stat().st_size)] for p in have])
        md = self.out / f"{stem}.md"
        md.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        html = write_html(md)
        files = {p: p.stat().st_size for p in [*have, md, html]}
        return ReportFiles(html=html, markdown=md, sections=sections("\n".join(self.lines)),
                           files=files)
