"""What a plot test reads off a matplotlib Axes."""

from __future__ import annotations

from typing import Any


def texts(ax: Any) -> list[str]:
    """Every text drawn in ``ax`` (bar values, annotations)."""
    return [t.get_text() for t in ax.texts]


def legend_labels(ax: Any) -> list[str]:
    """The labels of ``ax``'s legend (empty without one)."""
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg is not None else []


def line_labels(ax: Any) -> list[str]:
    """Labels of the labelled lines of ``ax``."""
    return [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
