"""Plot tests look at the figure a plot function drew: the plot functions close their
figures after saving, so ``drawn`` keeps them open and returns the new ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[Any]]]:
    """``drawn()``: the figures drawn so far in the test, in order (closed afterwards)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    before = set(plt.get_fignums())
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)

    def new() -> list[Any]:
        return [plt.figure(n) for n in sorted(set(plt.get_fignums()) - before)]

    yield new
    for n in set(plt.get_fignums()) - before:
        real_close(n)
