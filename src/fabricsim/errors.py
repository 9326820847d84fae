"""The one exception tree of fabricsim.

Every error the library raises on purpose derives from :class:`FabricsimError`. Messages
name the offending value and, where one exists, the fix. Only the CLI turns these into
exit codes (2 for bad input).

Example
-------
>>> from fabricsim.errors import ConfigError
>>> try:
...     raise ConfigError("nodes must be >= 1, got -3", field="cluster.nodes")
... except ConfigError as e:
...     print(e)
cluster.nodes: nodes must be >= 1, got -3
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FabricsimError(Exception):
    """Base class of every error fabricsim raises on purpose.

    ``field`` is the dotted path of the offending input (``cluster.nodes``), when known.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ConfigError(FabricsimError):
    """An input value is invalid: unknown preset, negative size, malformed file, ..."""


class UnknownPresetError(ConfigError):
    """A preset name is not in the catalog; the message lists the nearest names."""


class UnitError(ConfigError):
    """A quantity string (``"400Gbps"``, ``"1.5us"``) could not be parsed."""


class TopologyError(FabricsimError):
    """A fabric cannot be built as asked (radix too small, counts not divisible, ...)."""


class NoRouteError(FabricsimError):
    """No path exists between two nodes (e.g. after a link failure)."""


class ScheduleError(FabricsimError):
    """A schedule is malformed, or an algorithm cannot apply to this group or fabric."""


class SimulationError(FabricsimError):
    """A backend cannot complete a run (event budget exceeded, deadlock, ...)."""


class ModelError(FabricsimError):
    """A training/inference configuration is invalid (sizes do not divide, memory, ...)."""


class OutOfMemoryError(ModelError):
    """A layout valid in itself needs more GPU memory than the GPU has; the message says
    how much, and the cheapest change that fits (callers that try several layouts tell
    it from a layout that cannot be built at all)."""


class DeprecatedName(FutureWarning):
    """A field or flag written by its old name: still read, under its new one. Every face
    shows it beside the answer (``warning: ...``), so a scenario can be updated."""


def did_you_mean(value: str, choices: Iterable[str], n: int = 3) -> str:
    """Return a ``"did you mean ...?"`` hint for ``value`` among ``choices`` (or '')."""
    options = sorted(choices)
    close = difflib.get_close_matches(value, options, n=n, cutoff=0.5)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "valid names: " + ", ".join(options)


def unknown(kind: str, value: str, choices: Iterable[str], field: str | None = None) -> \
        UnknownPresetError:
    """Build the standard error for an unknown name of ``kind`` (``"system"``, ...)."""
    return UnknownPresetError(
        f"unknown {kind} {value!r}; {did_you_mean(value, choices)}", field=field
    )
