"""Load the hardware catalog from its TOML files and check every cross reference.

:func:`load_catalog` reads the eight files of a data directory (by default the copy shipped
inside the package), validates each entry into its frozen model, then checks that every key
one entry uses to name another (a system's ``gpu``, a fabric's ``switch`` ...) exists and is
of the right family. Any problem raises :class:`~fabricsim.errors.ConfigError` whose
``field`` names the file, the entry and the field (``systems.toml:dgx-h100.gpu``).
:func:`get_catalog` caches the shipped catalog, so it is read once per process.

Example
-------
>>> cat = get_catalog()
>>> cat.system("dgx-h100").gpu
'h100-sxm'
>>> cat.link(cat.gpu("h100-sxm").nvlink).bandwidth
450000000000.0
>>> cat.fabric("ib-ndr").sharp
True
>>> cat.system("dgx-h10")  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
fabricsim.errors.UnknownPresetError: unknown system 'dgx-h10'; did you mean 'dgx-h100' ...
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from fabricsim.catalog.models import (
    NAME_RE,
    CableSpec,
    FabricSpec,
    GpuSpec,
    LinkSpec,
    NicSpec,
    Spec,
    SwitchSpec,
    SystemSpec,
    TopologySpec,
)
from fabricsim.errors import ConfigError, did_you_mean, unknown

__all__ = ["FILES", "Catalog", "data_dir", "get_catalog", "load_catalog"]

S = TypeVar("S", bound=Spec)

#: Data file of each kind, in load order.
FILES: Mapping[str, tuple[str, type[Spec]]] = MappingProxyType(
    {
        "link": ("links.toml", LinkSpec),
        "gpu": ("gpus.toml", GpuSpec),
        "nic": ("nics.toml", NicSpec),
        "switch": ("switches.toml", SwitchSpec),
        "cable": ("cables.toml", CableSpec),
        "fabric": ("fabrics.toml", FabricSpec),
        "topology": ("topologies.toml", TopologySpec),
        "system": ("systems.toml", SystemSpec),
    }
)


class _Table(Mapping[str, S], Generic[S]):
    """Read-only name -> spec mapping whose lookups fail with a did-you-mean hint."""

    def __init__(self, kind: str, items: Mapping[str, S]) -> None:
        self._kind = kind
        self._items = dict(items)

    def __getitem__(self, name: str) -> S:
        try:
            return self._items[name]
        except KeyError:
            raise unknown(self._kind, name, self._items) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def get(self, name: str, default: Any = None) -> Any:
        """``table[name]`` if present, else ``default`` (no error)."""
        return self._items.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<{self._kind} table: {', '.join(self._items)}>"


class Catalog:
    """All hardware records, by kind. Immutable; build it with :func:`load_catalog`.

    Mapping attributes (``systems``, ``gpus`` ...) list the entries; accessor methods
    (``system(name)`` ...) fetch one and raise :class:`~fabricsim.errors.UnknownPresetError`
    with the nearest names when ``name`` is not in the catalog.
    """

    __slots__ = (
        "cables",
        "fabrics",
        "gpus",
        "links",
        "nics",
        "source_dir",
        "switches",
        "systems",
        "topologies",
    )

    links: Mapping[str, LinkSpec]
    gpus: Mapping[str, GpuSpec]
    nics: Mapping[str, NicSpec]
    switches: Mapping[str, SwitchSpec]
    cables: Mapping[str, CableSpec]
    fabrics: Mapping[str, FabricSpec]
    topologies: Mapping[str, TopologySpec]
    systems: Mapping[str, SystemSpec]
    source_dir: str

    def __init__(
        self,
        *,
        links: Mapping[str, LinkSpec],
        gpus: Mapping[str, GpuSpec],
        nics: Mapping[str, NicSpec],
        switches: Mapping[str, SwitchSpec],
        cables: Mapping[str, CableSpec],
        fabrics: Mapping[str, FabricSpec],
        topologies: Mapping[str, TopologySpec],
        systems: Mapping[str, SystemSpec],
        source_dir: str = "",
    ) -> None:
        object.__setattr__(self, "links", _Table("link", links))
        object.__setattr__(self, "gpus", _Table("gpu", gpus))
        object.__setattr__(self, "nics", _Table("nic", nics))
        object.__setattr__(self, "switches", _Table("switch", switches))
        object.__setattr__(self, "cables", _Table("cable", cables))
        object.__setattr__(self, "fabrics", _Table("fabric", fabrics))
        object.__setattr__(self, "topologies", _Table("topology", topologies))
        object.__setattr__(self, "systems", _Table("system", systems))
        object.__setattr__(self, "source_dir", source_dir)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Catalog is immutable")

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{attr}={len(getattr(self, attr))}"
            for attr in ("systems", "gpus", "links", "nics", "switches", "cables", "fabrics",
                         "topologies")
        )
        return f"Catalog({counts})"

    def system(self, name: str) -> SystemSpec:
        """The server/rack preset ``name`` (``"dgx-h100"``)."""
        return self.systems[name]

    def gpu(self, name: str) -> GpuSpec:
        """The GPU ``name`` (``"h100-sxm"``)."""
        return self.gpus[name]

    def link(self, name: str) -> LinkSpec:
        """The link technology ``name`` (``"nvlink4"``, ``"ib-ndr"``)."""
        return self.links[name]

    def nic(self, name: str) -> NicSpec:
        """The network adapter ``name`` (``"connectx-7"``)."""
        return self.nics[name]

    def switch(self, name: str) -> SwitchSpec:
        """The switch ``name`` (``"qm9700"``)."""
        return self.switches[name]

    def cable(self, name: str) -> CableSpec:
        """The cable/optic ``name`` (``"dac-400g"``)."""
        return self.cables[name]

    def fabric(self, name: str) -> FabricSpec:
        """The scale-out fabric preset ``name`` (``"ib-ndr"``, ``"roce-400g"``)."""
        return self.fabrics[name]

    def topology(self, name: str) -> TopologySpec:
        """The topology family ``name`` (``"fat-tree"``)."""
        return self.topologies[name]


def data_dir() -> Traversable:
    """The directory of TOML files shipped with the package."""
    return resources.files("fabricsim.catalog").joinpath("data")


def _read_table(directory: Traversable, filename: str) -> dict[str, Any]:
    entry = directory.joinpath(filename)
    if not entry.is_file():
        raise ConfigError(f"catalog file is missing from {directory}", field=filename)
    try:
        return tomllib.loads(entry.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}", field=filename) from e


def _where(filename: str, entry: str, loc: tuple[int | str, ...] = ()) -> str:
    return f"{filename}:{entry}" + "".join(f".{p}" for p in loc)


def _parse(filename: str, model: type[S], raw: Mapping[str, Any]) -> dict[str, S]:
    out: dict[str, S] = {}
    for name, body in raw.items():
        if not isinstance(body, dict):
            raise ConfigError(
                f"top-level key {name!r} must be a table ([{name}]), got {type(body).__name__}",
                field=_where(filename, name),
            )
        if not NAME_RE.match(name):
            raise ConfigError(
                f"entry name {name!r} must be lowercase words joined by '-' (e.g. 'dgx-h100')",
                field=_where(filename, name),
            )
        if "name" in body:
            raise ConfigError(
                "'name' is taken from the table key; remove it",
                field=_where(filename, name, ("name",)),
            )
        try:
            out[name] = model.model_validate({"name": name, **body})
        except ValidationError as e:
            raise _explain(e, model, filename, name) from None
    return out


def _explain(e: ValidationError, model: type[Spec], filename: str, entry: str) -> ConfigError:
    """Turn pydantic's first error into a ConfigError naming file, entry and field."""
    errors = e.errors()
    # an unknown field is usually a typo of a missing one: report it first, with a hint
    errors.sort(key=lambda err: err["type"] != "extra_forbidden")
    err = errors[0]
    loc = tuple(p for p in err["loc"] if not isinstance(p, int) or p >= 0)
    more = f" (and {len(errors) - 1} more problem(s) in this entry)" if len(errors) > 1 else ""
    fields = [f for f in model.model_fields if f != "name"]
    if err["type"] == "extra_forbidden":
        hint = did_you_mean(str(loc[-1]), fields) if loc else ""
        msg = f"unknown field for {model.__name__}; {hint}"
    elif err["type"] == "missing":
        msg = f"required field is missing (a {model.__name__} needs: {', '.join(fields)})"
    elif isinstance(err.get("input"), dict):
        msg = str(err["msg"])
    else:
        msg = f"{err['msg']}; got {err.get('input')!r}"
    return ConfigError(msg + more, field=_where(filename, entry, loc))


def _check_ref(
    filename: str,
    entry: str,
    field: str,
    value: str,
    kind: str,
    table: Mapping[str, S],
    *,
    allow_empty: bool = False,
    want: Callable[[S], bool] | None = None,
    want_desc: str = "",
) -> None:
    where = _where(filename, entry, (field,))
    if value == "" and allow_empty:
        return
    if value not in table:
        raise unknown(kind, value, table, field=where)
    if want is not None and not want(table[value]):
        raise ConfigError(f"{value!r} is not {want_desc}", field=where)


def _is_pcie(s: LinkSpec) -> bool:
    return s.family == "pcie"


def _is_nvlink(s: LinkSpec) -> bool:
    return s.family == "nvlink"


def _is_ici(s: LinkSpec) -> bool:
    return s.family == "ici"


def _is_nvswitch(s: SwitchSpec) -> bool:
    return s.family == "nvswitch"


def _is_not_nvswitch(s: SwitchSpec) -> bool:
    return s.family != "nvswitch"


_SYS = "systems.toml"


def _check_refs(cat: Catalog) -> None:
    for n, g in cat.gpus.items():
        _check_ref("gpus.toml", n, "nvlink", g.nvlink, "link", cat.links, allow_empty=True,
                   want=_is_nvlink, want_desc="an nvlink link")
        _check_ref("gpus.toml", n, "pcie", g.pcie, "link", cat.links, want=_is_pcie,
                   want_desc="a pcie link")
        _check_ref("gpus.toml", n, "ici", g.ici, "link", cat.links, allow_empty=True,
                   want=_is_ici, want_desc="an ici link")
    for n, c in cat.nics.items():
        _check_ref("nics.toml", n, "pcie", c.pcie, "link", cat.links, want=_is_pcie,
                   want_desc="a pcie link")
    for n, f in cat.fabrics.items():
        _check_ref("fabrics.toml", n, "link", f.link, "link", cat.links)
        _check_ref("fabrics.toml", n, "switch", f.switch, "switch", cat.switches,
                   want=_is_not_nvswitch, want_desc="a scale-out switch (not an NVSwitch)")
        _check_ref("fabrics.toml", n, "nic", f.nic, "nic", cat.nics)
    for n, s in cat.systems.items():
        _check_ref(_SYS, n, "gpu", s.gpu, "gpu", cat.gpus)
        if s.gpu_power_w > cat.gpus[s.gpu].tdp_w:
            raise ConfigError(
                f"gpu_power_w {s.gpu_power_w:g} W exceeds {s.gpu}'s TDP of "
                f"{cat.gpus[s.gpu].tdp_w:g} W; a cap can only lower it (0: the TDP)",
                field=_where(_SYS, n, ("gpu_power_w",)))
        _check_ref(_SYS, n, "nvswitch", s.nvswitch, "switch", cat.switches, allow_empty=True,
                   want=_is_nvswitch, want_desc="an nvswitch")
        _check_ref(_SYS, n, "pcie", s.pcie, "link", cat.links, want=_is_pcie,
                   want_desc="a pcie link")
        _check_ref(_SYS, n, "nic", s.nic, "nic", cat.nics)
        _check_ref(_SYS, n, "storage_nic", s.storage_nic, "nic", cat.nics, allow_empty=True)
        _check_ref(_SYS, n, "default_fabric", s.default_fabric, "fabric", cat.fabrics)
        _check_ref(_SYS, n, "default_topology", s.default_topology, "topology", cat.topologies)
        if not cat.gpus[s.gpu].nvlink and s.nvlink_domain_gpus != 1:
            raise ConfigError(
                f"gpu {s.gpu!r} has no NVLink, so nvlink_domain_gpus must be 1, "
                f"got {s.nvlink_domain_gpus}",
                field=_where(_SYS, n, ("nvlink_domain_gpus",)),
            )
        if bool(cat.gpus[s.gpu].ici) != bool(s.ici_host_shape):
            raise ConfigError(
                f"a system of TPU chips (gpu with an ici link) needs ici_host_shape and "
                f"ici_max_slice, and only such a system takes them ({s.gpu!r})",
                field=_where(_SYS, n, ("ici_host_shape",)))
        if s.nic_gbit_s > cat.nics[s.nic].max_gbit_s:
            raise ConfigError(
                f"nic_gbit_s {s.nic_gbit_s:g} exceeds {s.nic!r} max_gbit_s "
                f"{cat.nics[s.nic].max_gbit_s:g}",
                field=_where(_SYS, n, ("nic_gbit_s",)),
            )


def load_catalog(path_dir: str | os.PathLike[str] | Traversable | None = None) -> Catalog:
    """Read and validate the catalog in ``path_dir`` (default: the shipped data).

    Raises :class:`~fabricsim.errors.ConfigError` naming file, entry and field on the first
    problem found: malformed TOML, a wrong type or unit, an unknown field, a bad name, or a
    cross reference to a missing or wrong-family entry.
    """
    if path_dir is None:
        directory: Traversable = data_dir()
        label = "<package data>"
    elif isinstance(path_dir, (str, os.PathLike)):
        directory = Path(path_dir)
        label = str(directory)
        if not directory.is_dir():
            raise ConfigError(f"catalog directory {label!r} does not exist")
    else:
        directory = path_dir
        label = str(path_dir)
    parsed: dict[str, Mapping[str, Spec]] = {}
    for kind, (filename, model) in FILES.items():
        parsed[kind] = _parse(filename, model, _read_table(directory, filename))
    cat = Catalog(
        links=_cast(parsed["link"], LinkSpec),
        gpus=_cast(parsed["gpu"], GpuSpec),
        nics=_cast(parsed["nic"], NicSpec),
        switches=_cast(parsed["switch"], SwitchSpec),
        cables=_cast(parsed["cable"], CableSpec),
        fabrics=_cast(parsed["fabric"], FabricSpec),
        topologies=_cast(parsed["topology"], TopologySpec),
        systems=_cast(parsed["system"], SystemSpec),
        source_dir=label,
    )
    _check_refs(cat)
    return cat


def _cast(items: Mapping[str, Spec], model: type[S]) -> dict[str, S]:
    out: dict[str, S] = {}
    for k, v in items.items():
        assert isinstance(v, model)
        out[k] = v
    return out


@functools.cache
def get_catalog() -> Catalog:
    """The shipped catalog, loaded once per process (it is immutable, so sharing is safe)."""
    return load_catalog()


def with_systems(cat: Catalog, defs: Mapping[str, Mapping[str, Any]],
                 where: str = "systems") -> Catalog:
    """A copy of ``cat`` with user-defined systems added (e.g. from a scenario file).

    Each definition may name a ``base`` preset whose fields it inherits and overrides;
    ``source`` defaults to ``"user-defined"``. Errors name ``<where>.<name>.<field>``.

    >>> cat = with_systems(get_catalog(), {"my-a100": {
    ...     "base": "dgx-a100", "nics": 4, "nic": "connectx-7", "nic_gbit_s": 400}})
    >>> cat.system("my-a100").nics
    4
    """
    extra: dict[str, SystemSpec] = {}
    for name, raw in defs.items():
        data = dict(raw)
        base = data.pop("base", None)
        if base is not None:
            if base not in cat.systems:
                raise unknown("system", str(base), cat.systems, field=f"{where}.{name}.base")
            merged = cat.systems[base].model_dump()
            merged.update(data)
            merged["note"] = data.get("note", f"user-defined, based on {base}")
            data = merged
        data.setdefault("source", "user-defined")
        data.setdefault("note", "")
        data.setdefault("description", f"user-defined system {name}")
        data["name"] = name
        try:
            extra[name] = SystemSpec.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ConfigError(err["msg"], field=f"{where}.{name}" + (f".{loc}" if loc else "")
                              ) from None
    new = Catalog(links=cat.links, gpus=cat.gpus, nics=cat.nics, switches=cat.switches,
                  cables=cat.cables, fabrics=cat.fabrics, topologies=cat.topologies,
                  systems={**dict(cat.systems), **extra}, source_dir=cat.source_dir)
    try:
        _check_refs(new)
    except ConfigError as e:
        raise ConfigError(e.message.replace(_SYS, where), field=(e.field or "").replace(
            _SYS + ":", where + ".")) from None
    return new
