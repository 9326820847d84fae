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

#: Largest scenario file read (bytes); a larger one is refused before it is parsed.
MAX_SCENARIO_BYTES = 1_000_000
#: Most YAML nodes a scenario may expand to once aliases are followed (an "alias bomb" of
#: nested anchors expands exponentially; real scenarios have a few hundred nodes).
MAX_YAML_NODES = 100_000
#: Deepest nesting of mappings and lists a scenario may have.
MAX_YAML_DEPTH = 64
_M = TypeVar("_M", bound=BaseModel)
_N = TypeVar("_N", bound=BaseModel)


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers the line of every mapping key."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False
                       ) -> dict[Any, Any]:
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    lines: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if isinstance(key, str | int | float | bool) and key in lines:
            raise ConfigError(f"key {key!r} appears twice in one mapping (lines {lines[key]} "
                              f"and {line}); keep one")
        if isinstance(key, str | int | float | bool):
            lines[key] = line
    mapping["__lines__"] = lines
    return mapping


def _check_shape(root: yaml.Node, source: str) -> None:
    """Refuse a document that nests too deeply or expands to too many nodes.

    The expanded size counts a node once per path to it (what constructing and validating
    the document costs), memoised per node, so the check itself stays linear.
    """
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if id(node) in size:
            continue
        if depth > MAX_YAML_DEPTH:
            line = node.start_mark.line + 1
            raise ConfigError(f"{source}: nested more than {MAX_YAML_DEPTH} levels deep "
                              f"(line {line}); a scenario needs a handful")
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = 1
            continue
        kids = ([k for pair in node.value for k in pair] if isinstance(node, yaml.MappingNode)
                else list(node.value))
        if not done:
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in kids if id(k) not in size)
            continue
        total = 1 + sum(size[id(k)] for k in kids)
        if total > MAX_YAML_NODES:
            raise ConfigError(f"{source}: the document expands to more than "
                              f"{MAX_YAML_NODES:,} values once its aliases (*name) are "
                              "followed; a scenario needs far fewer (is it an alias bomb?)")
        size[id(node)] = total


def read_text_file(path: Path, limit: int, what: str, field: str | None = None) -> str:
    """Read at most ``limit`` bytes of UTF-8 text, or a ConfigError saying why not.

    Refuses folders, files larger than ``limit`` (also endless ones such as ``/dev/zero``:
    only ``limit + 1`` bytes are ever read), binary data and other encodings (with the byte
    offset of the first bad byte).
    """
    if path.is_dir():
        raise ConfigError(f"{str(path)!r} is a folder; give a {what} file", field=field)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {e.strerror or e}",
                          field=field) from None
    if len(data) > limit:
        raise ConfigError(f"{str(path)!r} is larger than the {limit:,}-byte limit for a "
                          f"{what}", field=field)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ConfigError(f"{str(path)!r} is UTF-16 text; save it as UTF-8", field=field)
    nul = data.find(b"\0")
    if nul >= 0:
        raise ConfigError(f"{str(path)!r} holds binary data (a NUL byte at offset {nul}); "
                          f"a {what} is UTF-8 text", field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{str(path)!r} is not UTF-8 text (byte {e.start}: "
                          f"{data[e.start:e.start + 1]!r}); save it as UTF-8",
                          field=field) from None


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


def field_line(text: str, field: str | None) -> int | None:
    """The line of ``text`` (scenario YAML) where the dotted ``field`` (``training.tp``,
    ``faults.0.node``) is written, or None when it is not found or the text is not YAML.
    Errors of the sections validated after loading (``training:``, ``packet:``) name a
    field but no line; this finds it (or the line of its nearest written parent).

    >>> field_line("cluster:\\n  nodes: 2\\ntraining:\\n  model: x\\n  tp: y\\n", "training.tp")
    5
    """
    import re

    if not field or len(text) > MAX_SCENARIO_BYTES:
        return None
    loc: list[int | str] = [int(p) if p.isdigit() else p
                            for p in re.findall(r"[^.\[\]\s]+", field.split(" (")[0])]
    try:
        loader = _LineLoader(text)
    except yaml.YAMLError:
        return None
    try:
        raw = loader.get_single_data()
    except (yaml.YAMLError, ConfigError, RecursionError):
        return None
    finally:
        loader.dispose()
    return _line_of(raw, tuple(loc))  # the deepest part of the path that exists


def load_scenario_text(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate scenario YAML text."""
    if len(text) > MAX_SCENARIO_BYTES:
        raise ConfigError(f"{source}: scenario is {len(text)} bytes; the limit is "
                          f"{MAX_SCENARIO_BYTES}")
    try:
        loader = _LineLoader(text)  # reads the text: control characters fail here
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not YAML text: {e}".replace("\n", " ")) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError(f"{source}: the scenario is empty; write at least a cluster: "
                              "section (see docs/scenarios.md)")
        _check_shape(node, source)
        raw = loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{source}: malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested more than {MAX_YAML_DEPTH} levels deep; a "
                          "scenario needs a handful") from None
    except ConfigError as e:
        if e.message.startswith(source):
            raise
        raise ConfigError(f"{source}: {e.message}", field=e.field) from None
    finally:
        loader.dispose()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: a scenario must be a mapping of sections (cluster:, "
                          f"collective:, ...), got {type(raw).__name__}")
    return validate_scenario(_strip(raw), raw)


def validate_scenario(data: Any, lines: Any = None) -> Scenario:
    """``data`` (a scenario as a mapping) validated as a :class:`Scenario`: errors name
    the field and, with ``lines`` (the mapping as loaded, with the lines of its keys), the
    line; a key a section does not have gets the field meant. What reading noticed (a
    field written by its old name) becomes the scenario's :attr:`~Scenario.notes`.

    >>> sc = validate_scenario({"training": {"model": "llama3-8b", "interleave": 2}})
    >>> sc.training.vp, sc.notes[0].split(";")[0]
    (2, 'training.interleave is the old name of training.vp')
    """
    try:
        sc, notes = noted(Scenario, data)
        return sc.with_notes(notes) if notes else sc
    except ValidationError as e:
        raise _located(e, lines if lines is not None else data) from None
    except ConfigError as e:
        if e.field and "(line" not in e.field and lines is not None:
            line = _line_of(lines, _path(e.field))
            if line:
                raise ConfigError(e.message, field=f"{e.field} (line {line})") from None
        raise


def noted(model: type[_N], data: Any) -> tuple[_N, tuple[str, ...]]:
    """``model.model_validate(data)`` (a :class:`Scenario`, or a section laid into one
    later) and what the validation noticed (a field written by its old name: a
    scenario's notes); pydantic's ValidationError is raised as it is."""
    import warnings

    from fabricsim.errors import DeprecatedName

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DeprecatedName)
        out = model.model_validate(data)
    notes = tuple(dict.fromkeys(str(w.message) for w in seen
                                if issubclass(w.category, DeprecatedName)))
    for w in seen:  # anything else is shown as it would have been
        if not issubclass(w.category, DeprecatedName):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, notes


def _path(field: str) -> tuple[int | str, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p
                 for p in re.findall(r"[^.\[\]\s]+", field.split(" (")[0]))


def _located(e: ValidationError, raw: Any) -> ConfigError:
    """pydantic's first error as a ConfigError naming the field, its line and, for a key
    a job section does not have, the field meant."""
    from fabricsim.scenario.sections import SECTION_TYPES, key_hint

    err = e.errors()[0]
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc)
    line = _line_of(raw, loc)
    where = f" (line {line})" if line else ""
    got = err.get("input")
    got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) \
        and ", got " not in str(err["msg"]) else ""
    more = f" (and {len(e.errors()) - 1} more error(s))" if len(e.errors()) > 1 else ""
    hint = ""
    if err["type"] == "extra_forbidden" and len(loc) == 2 and loc[0] in SECTION_TYPES:
        hint = key_hint(str(loc[1]), set(SECTION_TYPES[str(loc[0])].model_fields))
    msg = str(err["msg"]).removeprefix("Value error, ")
    return ConfigError(f"{msg}{got_s}{hint}{more}", field=f"{path}{where}")


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
    if not p.exists() and not p.is_symlink():
        shipped = shipped_scenarios()
        name = p.name[: -len(".yaml")] if p.name.endswith(".yaml") else p.name
        if p.parent == Path(".") and name in shipped:
            return load_scenario_text(shipped[name], source=name)
        from fabricsim.errors import did_you_mean

        raise ConfigError(f"scenario file {str(p)!r} does not exist and is not a shipped "
                          f"scenario; {did_you_mean(name, shipped)}")
    return load_scenario_text(read_text_file(p, MAX_SCENARIO_BYTES, "scenario"), source=str(p))


def validate_section(model: type[_M], data: Any, prefix: str) -> _M:
    """Validate ``data`` against ``model``; errors name ``prefix.field``."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        path = ".".join([prefix, *(str(p) for p in err["loc"])])
        got = err.get("input")
        got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) \
        and ", got " not in str(err["msg"]) else ""
        raise ConfigError(f"{err['msg']}{got_s}", field=path) from None
