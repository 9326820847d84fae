"""Read scenario files: YAML in, a validated :class:`Scenario` out, errors with line numbers.

Example
-------
>>> s = load_scenario_text("cluster:\\n  system: dgx-a100\\n  nodes: 2\\n")
>>> s.cluster.nodes
2
>>> try:
...     load_scenario_text("cluster:\\n  nodes: -3\\n")
... except ConfigError as e:
...     print(e)
cluster.nodes (line 2): Input should be greater than or equal to 1, got -3
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from fabricsim.errors import ConfigError
from fabricsim.scenario.schema import Scenario

MAX_SCENARIO_BYTES = 1_000_000
_M = TypeVar("_M", bound=BaseModel)


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping key."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False
                       ) -> dict[Any, Any]:
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    lines = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        lines[key] = key_node.start_mark.line + 1
    mapping["__lines__"] = lines
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "__lines__"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _line_of(obj: Any, loc: tuple[int | str, ...]) -> int | None:
    line = None
    cur = obj
    for part in loc:
        if isinstance(cur, dict):
            line = cur.get("__lines__", {}).get(part, line)
            cur = cur.get(part)
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            cur = cur[part]
        else:
            break
    return line


def load_scenario_text(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate scenario YAML text."""
    if len(text) > MAX_SCENARIO_BYTES:
        raise ConfigError(f"{source}: scenario is {len(text)} bytes; the limit is "
                          f"{MAX_SCENARIO_BYTES}")
    try:
        raw = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{source}: malformed YAML{where}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a scenario must be a mapping of sections (cluster:, "
                          f"collective:, ...), got {type(raw).__name__}")
    try:
        return Scenario.model_validate(_strip(raw))
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc)
        line = _line_of(raw, loc)
        where = f" (line {line})" if line else ""
        got = err.get("input")
        got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) else ""
        more = f" (and {len(e.errors()) - 1} more error(s))" if len(e.errors()) > 1 else ""
        raise ConfigError(f"{err['msg']}{got_s}{more}", field=f"{path}{where}") from None


def shipped_scenarios() -> dict[str, str]:
    """Scenarios that ship with fabricsim: name -> YAML text.

    >>> "train-llama3-70b-256" in shipped_scenarios()
    True
    """
    from importlib import resources

    folder = resources.files("fabricsim") / "scenarios"
    out: dict[str, str] = {}
    for f in folder.iterdir():
        if f.name.endswith(".yaml"):
            out[f.name[: -len(".yaml")]] = f.read_text(encoding="utf-8")
    return dict(sorted(out.items()))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file, or a shipped scenario by name."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{str(p)!r} is a folder; give a scenario file (.yaml)")
    if not p.exists():
        shipped = shipped_scenarios()
        name = p.name[: -len(".yaml")] if p.name.endswith(".yaml") else p.name
        if p.parent == Path(".") and name in shipped:
            return load_scenario_text(shipped[name], source=name)
        from fabricsim.errors import did_you_mean

        raise ConfigError(f"scenario file {str(p)!r} does not exist and is not a shipped "
                          f"scenario; {did_you_mean(name, shipped)}")
    if p.stat().st_size > MAX_SCENARIO_BYTES:
        raise ConfigError(f"{p}: scenario is {p.stat().st_size} bytes; the limit is "
                          f"{MAX_SCENARIO_BYTES}")
    return load_scenario_text(p.read_text(encoding="utf-8"), source=str(p))


def validate_section(model: type[_M], data: Any, prefix: str) -> _M:
    """Validate ``data`` against ``model``; errors name ``prefix.field``."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        path = ".".join([prefix, *(str(p) for p in err["loc"])])
        got = err.get("input")
        got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) else ""
        raise ConfigError(f"{err['msg']}{got_s}", field=path) from None
