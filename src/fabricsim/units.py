"""Units: SI inside (bytes, seconds, bytes/s), strings parsed only here.

Bandwidth strings use bits per second for network rates (``"400Gbps"``, ``"400Gb/s"``) and
bytes per second for bus rates (``"64GB/s"``, ``"900GBps"``). Sizes accept SI and binary
prefixes (``"1GB"`` = 1e9, ``"1GiB"`` = 2**30). Times take ``ns``, ``us``/``µs``, ``ms``,
``s``.

Example
-------
>>> parse_bandwidth("400Gbps")
50000000000.0
>>> parse_size("8GiB")
8589934592
>>> parse_time("1.5us")
1.5e-06
>>> format_bytes(1048576)
'1 MiB'
"""

from __future__ import annotations

import re

from fabricsim.errors import UnitError

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0,
         "min": 60.0, "h": 3600.0}

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SIZE_RE = re.compile(_NUM + r"\s*([kKMGTP]i?)?\s*(B)?$")
_BW_RE = re.compile(_NUM + r"\s*([kKMGTP]i?)?\s*(b|B)(?:ps|/s)$")
_TIME_RE = re.compile(_NUM + r"\s*(ns|us|µs|ms|s|min|h)?$")

_NCCL_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)([bB]?)\s*$")
#: Largest message size a collective sweep may ask for (1 PiB per rank: far beyond any
#: GPU's memory).
MAX_MESSAGE_BYTES = 2**50

#: Gigabit per second in bytes/s.
GBPS_BITS = 1e9 / 8
#: Gigabyte per second in bytes/s.
GBPS = 1e9


def _prefix(p: str | None) -> float:
    if not p:
        return 1.0
    return _BIN[p] if p.endswith("i") else _SI[p]


def parse_size(value: str | int | float, field: str | None = None) -> int:
    """Parse a size in bytes: ``"1MiB"``, ``"4GB"``, ``"128"`` or a number; must be >= 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        m = _SIZE_RE.match(str(value).strip())
        if not m:
            raise UnitError(
                f"cannot read size {value!r}; write e.g. '1MiB', '4GB' or a byte count",
                field=field,
            )
        out = float(m.group(1)) * _prefix(m.group(2))
    if out < 0:
        raise UnitError(f"size must be >= 0 bytes, got {value!r}", field=field)
    return round(out)


def parse_nccl_size(value: str | int, field: str | None = "size") -> int:
    """A message size as nccl-tests reads ``-b``/``-e``: ``8``, ``1M``, ``1G`` (a bare
    ``K``/``M``/``G`` is binary: 1M = 2**20), ``128MiB`` (binary), ``4GB`` (decimal).
    A collective sweep's sizes (``collective.minbytes``, ``fabricsim bench -b``) read
    this way everywhere.

    >>> parse_nccl_size("1M"), parse_nccl_size("128MiB"), parse_nccl_size("1GB")
    (1048576, 134217728, 1000000000)
    >>> parse_nccl_size("1.5")
    Traceback (most recent call last):
    ...
    fabricsim.errors.UnitError: size: size '1.5' is 1.5 bytes, not a whole number; ...K
    """
    if isinstance(value, bool):
        raise UnitError(f"a size is a number of bytes, got {value!r}", field=field)
    m = _NCCL_SIZE_RE.match(str(value))
    if not m:
        raise UnitError(f"cannot read size {value!r}; write e.g. 8, 1M, 1G or 128MiB",
                        field=field)
    num, prefix, binary, b = m.groups()
    power = " KMGT".index(prefix.upper()) if prefix else 0
    base = 1000 if (b and not binary and prefix) else 1024
    size = float(num) * base**power
    if not size <= MAX_MESSAGE_BYTES:
        raise UnitError(f"size {value!r} is larger than the {MAX_MESSAGE_BYTES:,} B (1 PiB) "
                        "a sweep may ask for", field=field)
    if size != int(size):
        raise UnitError(f"size {value!r} is {size:g} bytes, not a whole number; write "
                        f"e.g. {max(int(size), 1)} or {num}K", field=field)
    return int(size)


def parse_bandwidth(value: str | int | float, field: str | None = None) -> float:
    """Parse a bandwidth into bytes/s. Numbers are taken as bytes/s; must be > 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        m = _BW_RE.match(str(value).strip())
        if not m:
            raise UnitError(
                f"cannot read bandwidth {value!r}; write e.g. '400Gbps' (bits) or '64GB/s' "
                "(bytes)",
                field=field,
            )
        out = float(m.group(1)) * _prefix(m.group(2))
        if m.group(3) == "b":
            out /= 8.0
    if out <= 0:
        raise UnitError(f"bandwidth must be > 0, got {value!r}", field=field)
    return out


def parse_time(value: str | int | float, field: str | None = None) -> float:
    """Parse a duration into seconds (numbers are seconds; units ns, us, ms, s, min, h);
    must be >= 0.

    >>> parse_time("30min"), parse_time("2h"), parse_time("1.5us")
    (1800.0, 7200.0, 1.5e-06)
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        m = _TIME_RE.match(str(value).strip())
        if not m:
            raise UnitError(
                f"cannot read time {value!r}; write e.g. '1.5us', '200ns' or '2ms'",
                field=field,
            )
        out = float(m.group(1)) * _TIME[m.group(2) or ""]
    if out < 0:
        raise UnitError(f"time must be >= 0, got {value!r}", field=field)
    return out


def format_bytes(n: float) -> str:
    """Human size with binary prefixes: ``format_bytes(3 * 2**30) == '3 GiB'``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def format_time(seconds: float) -> str:
    """Human duration: ``format_time(1.5e-6) == '1.5 us'``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def gbps(bytes_per_s: float) -> float:
    """Bytes/s to GB/s (decimal gigabytes, as nccl-tests prints)."""
    return bytes_per_s / 1e9
