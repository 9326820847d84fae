"""Tables that ship inside the package, written by the benchmarks (held-out error bands).

>>> shipped_json("fabricsim.collectives", "heldout.json")["groups"]["one server, bandwidth"][
...     "rows"] > 0
True
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def shipped_json(package: str, name: str) -> dict[str, Any]:
    """The JSON document ``name`` shipped in ``package`` (e.g. a held-out table that
    ``benchmarks/accuracy_*.py --write`` writes there)."""
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data
