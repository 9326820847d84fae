"""Results as flat records: ``to_dict()`` (valid JSON) and ``to_pandas()`` for every result.

Every public result type mixes in :class:`Tabular`, which gives it two methods:

* ``to_dict()``: one flat mapping of column name to a JSON scalar (str, int, float, bool
  or ``None``). Nested sections are joined with dots (``breakdown.compute``); a list of
  strings becomes one ``"; "``-joined string; other short lists and small arrays get one
  column per item (``prefill_ranks.0``); arrays longer than :data:`MAX_ITEMS` are left out
  (they stay on the object). NaN and infinities become ``None``, so
  ``json.dumps(r.to_dict(), allow_nan=False)`` always works.
* ``to_pandas()``: a :class:`pandas.DataFrame` of those records (one row for most
  results, one row per candidate or suspect for searches). pandas comes with the ``store``
  extra (``pip install 'fabricsim[store]'``); without it the call says so.

:func:`frame` turns many results (or plain mappings, such as the rows of
:func:`~fabricsim.workloads.training.scaling.scaling_curve`) into one DataFrame, a row each.

Example
-------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Run(Tabular):
...     name: str
...     times_s: dict[str, float]
...     ranks: tuple[int, int]
...     notes: tuple[str, ...] = ()
...     @property
...     def total_s(self) -> float:
...         return sum(self.times_s.values())
>>> r = Run("a", {"x": 1.0, "y": float("nan")}, (0, 7), ("first", "second"))
>>> r.to_dict()
{'name': 'a', 'times_s.x': 1.0, 'times_s.y': None, 'ranks.0': 0, 'ranks.1': 7, \
'notes': 'first; second', 'total_s': None}
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["MAX_ITEMS", "Tabular", "flatten", "frame", "jsonable", "scalars"]

#: Sequences and arrays longer than this are not spread over columns by :func:`flatten`.
MAX_ITEMS = 64

_Scalar = str | int | float | bool | None


def _scalar(v: Any) -> tuple[bool, _Scalar]:
    """(True, JSON scalar) for a scalar value, (False, None) for anything else."""
    if v is None or isinstance(v, bool | str):
        return True, v
    if isinstance(v, np.bool_):
        return True, bool(v)
    if isinstance(v, int | np.integer):
        return True, int(v)
    if isinstance(v, float | np.floating):
        f = float(v)
        return True, f if math.isfinite(f) else None
    if isinstance(v, enum.Enum):
        return _scalar(v.value) if isinstance(v.value, str | int | float) else (True, v.name)
    return False, None


def flatten(value: Any, prefix: str = "") -> dict[str, _Scalar]:
    """One flat, JSON-valid mapping from nested mappings, dataclasses, lists and arrays.

    >>> flatten({"a": {"b": 1, "c": [2.5, float("inf")]}, "tags": ["x", "y"]})
    {'a.b': 1, 'a.c.0': 2.5, 'a.c.1': None, 'tags': 'x; y'}
    >>> flatten({"big": list(range(MAX_ITEMS + 1)), "none": [], "ok": True})
    {'none': '', 'ok': True}
    """
    out: dict[str, _Scalar] = {}

    def key(k: Any) -> str:
        return f"{prefix}.{k}" if prefix else str(k)

    is_scalar, s = _scalar(value)
    if is_scalar:
        out[prefix or "value"] = s
    elif isinstance(value, Tabular):  # its own record, flattened even if nested
        out.update(flatten(value.to_dict(), prefix))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            out.update(flatten(v, key(k)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            out.update(flatten(getattr(value, f.name), key(f.name)))
    elif isinstance(value, list | tuple | np.ndarray):
        items = value.tolist() if isinstance(value, np.ndarray) else list(value)
        if all(isinstance(i, str) for i in items):  # an empty list too: ""
            out[prefix or "value"] = "; ".join(items)
        elif len(items) <= MAX_ITEMS:
            for i, v in enumerate(items):
                out.update(flatten(v, key(i)))
    else:
        out[prefix or "value"] = str(value)
    return out


def jsonable(value: Any) -> Any:
    """``value`` as nested JSON-valid data: the scalars :func:`flatten` gives (NaN and
    infinity as None, numpy scalars as Python ones), mappings with text keys, sequences
    and arrays as lists, results by their ``as_dict()`` (else ``to_dict()``), anything
    else as text. Unlike :func:`flatten`, the nesting is kept.

    >>> jsonable({"a": float("nan"), 1: (np.float64(2.0), np.int64(3)), "b": np.arange(2)})
    {'a': None, '1': [2.0, 3], 'b': [0, 1]}
    """
    is_scalar, s = _scalar(value)
    if is_scalar:
        return s
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    as_dict = getattr(value, "as_dict", None) or getattr(value, "to_dict", None)
    if callable(as_dict):
        return jsonable(as_dict())
    return str(value)


def scalars(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Only the scalar leaves of ``mapping`` (nested mappings and lists of strings kept;
    other lists, arrays and objects dropped): for records whose per-link or per-flow
    arrays do not belong in a row.

    >>> scalars({"status": "done", "queue": np.zeros(3), "drops": {"lossy": 0, "t": [1]},
    ...          "faults": ["link 3 down"]})
    {'status': 'done', 'drops': {'lossy': 0}, 'faults': ['link 3 down']}
    """
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        if isinstance(v, Mapping):
            inner = scalars(v)
            if inner:
                out[str(k)] = inner
        elif _scalar(v)[0] or (isinstance(v, list | tuple)
                               and all(isinstance(i, str) for i in v)):
            out[str(k)] = v
    return out


def _pandas() -> Any:
    from fabricsim._extras import require

    return require("pandas", "store", "results as DataFrames")


def frame(results: Iterable[Any]) -> Any:
    """A pandas DataFrame with a row per result (a :class:`Tabular` or a mapping).

    >>> frame([{"gpus": 8, "t": {"s": 1.0}}, {"gpus": 16, "t": {"s": 0.6}}])
       gpus  t.s
    0     8  1.0
    1    16  0.6
    """
    pd = _pandas()
    rows = [r.to_dict() if isinstance(r, Tabular) else flatten(r) for r in results]
    return pd.DataFrame.from_records(rows)


class Tabular:
    """Mixin for result types: ``to_dict()`` and ``to_pandas()`` from one record.

    The record is the class's ``as_dict()`` when it has one (its JSON-ready summary),
    else its dataclass fields followed by its public properties; a class overrides
    :meth:`_record` to choose, and :meth:`_rows` for a multi-row DataFrame.
    """

    __slots__ = ()

    def _record(self) -> Mapping[str, Any]:
        as_dict = getattr(self, "as_dict", None)
        if callable(as_dict):
            got = as_dict()
            if isinstance(got, Mapping):
                return got
        rec: dict[str, Any] = {}
        if dataclasses.is_dataclass(self):
            rec.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        for cls in reversed(type(self).__mro__):
            for name, attr in vars(cls).items():
                if isinstance(attr, property) and not name.startswith("_"):
                    try:
                        rec[name] = getattr(self, name)
                    except ArithmeticError:  # e.g. a rate of an empty run
                        rec[name] = None
        return rec

    def _rows(self) -> list[dict[str, Any]]:
        return [self.to_dict()]

    def to_dict(self) -> dict[str, Any]:
        """A flat mapping of column to JSON scalar (no NaN or infinity)."""
        return flatten(self._record())

    def to_pandas(self) -> Any:
        """A pandas DataFrame of this result (the ``store`` extra)."""
        return _pandas().DataFrame.from_records(self._rows())
