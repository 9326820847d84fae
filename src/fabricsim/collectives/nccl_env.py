"""What NCCL's environment variables allow the tuner to choose.

``NCCL_ALGO`` and ``NCCL_PROTO`` restrict the algorithms and protocols NCCL picks from
(a list, or ``^`` and a list to exclude); ``NCCL_NVLS_ENABLE`` and ``NCCL_COLLNET_ENABLE``
turn NVLink SHARP and in-network reduction (SHARP, run as CollNet) off or on. A
:class:`NcclEnv` is read once (:func:`nccl_env`) and narrows the choice of
:func:`fabricsim.collectives.tuner.choose` as NCCL's own settings do.

Example
-------
>>> nccl_env({"NCCL_ALGO": "Ring"}).allowed_algorithms(["ring", "tree"])
['ring']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fabricsim.errors import ConfigError

__all__ = ["NCCL_ALGOS", "NCCL_PROTOS", "NcclEnv", "nccl_env"]


#: NCCL_ALGO names -> fabricsim algorithms (CollNet runs as SHARP; with NVLS, NVLS+SHARP).
NCCL_ALGOS = {"ring": ("ring",), "tree": ("tree",), "nvls": ("nvls",),
              "nvlstree": ("nvlstree",), "collnetdirect": ("sharp", "nvls_sharp"),
              "collnetchain": ("sharp", "nvls_sharp"), "collnet": ("sharp", "nvls_sharp")}
#: NCCL_PROTO names -> fabricsim protocols.
NCCL_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}


@dataclass(frozen=True)
class NcclEnv:
    """What NCCL's environment variables allow: algorithm and protocol sets (``None``:
    NCCL's own choice), and SHARP/NVLS switches (``None``: the fabric's default)."""

    algorithms: frozenset[str] | None = None
    protocols: frozenset[str] | None = None
    collnet: bool | None = None
    nvls: bool | None = None

    def allowed_algorithms(self, candidates: Sequence[str]) -> list[str]:
        """``candidates`` NCCL may run under these settings."""
        out = [a for a in candidates if self.algorithms is None or a in self.algorithms]
        if self.nvls is False:
            out = [a for a in out if not a.startswith("nvls")]
        if self.collnet is not True:
            out = [a for a in out if a not in ("sharp", "nvls_sharp")]
        return out


def _names(var: str, value: str, table: dict[str, Any]) -> set[str]:
    text = value.strip()
    if ";" in text or ":" in text:  # per-collective form: 'allreduce:tree,ring;...'
        raise ConfigError(f"{var}={value!r}: the per-collective form is not supported; give "
                          f"a plain list such as {var}=Ring,Tree", field=var)
    neg = text.startswith("^")
    words = [w.strip().lower() for w in text.lstrip("^").split(",") if w.strip()]
    bad = [w for w in words if w not in table]
    if bad or not words:
        raise ConfigError(f"{var}={value!r}: unknown name(s) {', '.join(bad) or '(none)'}; "
                          f"valid: {', '.join(sorted(table))} (a leading ^ excludes)",
                          field=var)
    chosen = set(words)
    return set(table) - chosen if neg else chosen


def _flag(var: str, value: str) -> bool:
    v = value.strip()
    if v not in ("0", "1"):
        raise ConfigError(f"{var}={value!r}: must be 0 or 1", field=var)
    return v == "1"


def nccl_env(env: Mapping[str, str]) -> NcclEnv:
    """Read ``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_COLLNET_ENABLE`` and
    ``NCCL_NVLS_ENABLE`` from a mapping (e.g. ``os.environ``) as NCCL reads them.

    >>> e = nccl_env({"NCCL_ALGO": "^Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"})
    >>> e.allowed_algorithms(["ring", "tree", "nvls", "nvlstree"]), sorted(e.protocols)
    (['ring'], ['simple'])
    """
    algos = protos = None
    if env.get("NCCL_ALGO"):
        algos = frozenset(a for n in _names("NCCL_ALGO", env["NCCL_ALGO"], NCCL_ALGOS)
                          for a in NCCL_ALGOS[n])
    if env.get("NCCL_PROTO"):
        protos = frozenset(NCCL_PROTOS[n] for n in
                           _names("NCCL_PROTO", env["NCCL_PROTO"], NCCL_PROTOS))
    collnet = _flag("NCCL_COLLNET_ENABLE", env["NCCL_COLLNET_ENABLE"]) \
        if env.get("NCCL_COLLNET_ENABLE") else None
    nvls = _flag("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"]) \
        if env.get("NCCL_NVLS_ENABLE") else None
    return NcclEnv(algorithms=algos, protocols=protos, collnet=collnet, nvls=nvls)
