"""The format stamp of fabricsim's DuckDB files (sweep results, web job store).

A file records the format it was written in under one key of a two-column meta table; a
file of another format is refused by its owner with a message of its own.

Example
-------
>>> import duckdb
>>> db = duckdb.connect(":memory:")
>>> stamp_format(db, "meta", "store_version", 2) is None  # a new file takes the stamp
True
>>> stamp_format(db, "meta", "store_version", 3)  # another format: the one it holds
'2'
"""

from __future__ import annotations

from typing import Any

__all__ = ["stamp_format"]


def stamp_format(db: Any, table: str, key: str, version: int) -> str | None:
    """Create ``table`` (key, value) if missing and record ``version`` under ``key`` in a
    file that has none; return the format an existing stamp names when it is not
    ``version`` (``None`` when it matches or was just written).

    ``table`` and ``key`` are the caller's constants, never user input.
    """
    db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key VARCHAR PRIMARY KEY, "
               "value VARCHAR)")
    row = db.execute(f"SELECT value FROM {table} WHERE key = ?", [key]).fetchone()
    if row is None:
        db.execute(f"INSERT INTO {table} VALUES (?, ?)", [key, str(version)])
        return None
    return None if row[0] == str(version) else str(row[0])
