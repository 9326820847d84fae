"""Read NCCL's own diagnostics (``NCCL_DEBUG=INFO`` output) back into a cluster.

An ``NCCL_DEBUG=INFO`` log says what NCCL found and built: the communicator's shape
(``comm ... nRanks 16 nNodes 2 localRanks 8``), the network devices it uses and their link
layer (``NET/IB : Using [0]mlx5_0:1/IB/SHARP ...``, ``NET/OFI`` for AWS EFA,
``NET/Socket`` for TCP), its rings (``Channel 00/16 :  0 1 ...``), channel counts
(``16 coll channels, ... 16 nvls channels``), NVLink SHARP and multi-node NVLink
(``MNNVL 1``), and its version. When nccl-tests printed the log, its ``Using devices``
list adds the hosts and the GPU model. :func:`read_nccl_debug` collects those facts;
:func:`cluster_of` turns them into a scenario's ``cluster:`` and ``systems:`` sections
(``fabricsim describe --from-nccl-log``), saying which facts came from the log and which
from the catalog (NCCL does not print NIC speeds).

Example
-------
>>> log = read_nccl_debug('''
... NCCL version 2.21.5+cuda12.4
... n1:11:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:1.2.3.4<0>
... n1:11:20 [0] NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
... n2:12:21 [0] NCCL INFO comm 0x2 rank 2 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
... n1:11:20 [0] NCCL INFO Channel 00/02 :    0   1   2   3
... ''')
>>> log.version, log.nodes, log.gpus_per_node, log.nics, log.link_layer, log.channels
('2.21.5', 2, 2, ('mlx5_0', 'mlx5_1'), 'IB', 2)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricsim.errors import ConfigError, UnknownPresetError

#: ``host:pid:tid [dev] NCCL INFO message`` (a warning names its source line before
#: ``NCCL WARN``), with an optional launcher tag in front (``[0] ``, ``[1,0]<stdout>:``).
_LINE = re.compile(r"^(?:\[[\d,]+\](?:<\w+>)?:?\s*)?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)"
                   r"\s+\[(?P<dev>\d+)\]\s+(?:\S+:\d+\s+)?NCCL\s+(?P<level>INFO|WARN)\s+"
                   r"(?P<msg>.*)$")
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")
_COMM = re.compile(r"\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) nRanks (?P<n>\d+) nNodes (?P<nodes>\d+)"
                   r" localRanks (?P<local>\d+) localRank \d+(?: MNNVL (?P<mnnvl>\d))?")
_INIT = re.compile(r"ncclCommInitRank comm 0x[0-9a-f]+ rank (?P<rank>\d+) nranks (?P<n>\d+)")
_NET_IB = re.compile(r"NET/IB\s*:\s*Using\s+(?P<devs>(?:\[\d+\]\S+\s*)+)")
_IB_DEV = re.compile(r"\[\d+\](?P<name>[^:\s]+):(?P<port>\d+)/(?P<layer>IB|RoCE)(?P<sharp>/SHARP)?")
_NET_OFI = re.compile(r"NET/OFI Selected [Pp]rovider is (?P<prov>\w+)(?:.*?found (?P<n>\d+) nics)?")
_NET_SOCKET = re.compile(r"NET/Socket\s*:\s*Using\s+(?P<devs>(?:\[\d+\]\S+\s*)+)")
_RING = re.compile(r"^Channel (?P<ch>\d+)/(?P<of>\d+) :\s+(?P<order>\d+(?:\s+\d+)*)\s*$")
_COUNTS = re.compile(r"(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?"
                     r"(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels")
_NVLS = re.compile(r"NVLS multicast support is available")
#: nccl-tests' ``Using devices`` list: ``#  Rank  0 Group  0 Pid  101 on node-a device  0
#: [0x18] NVIDIA H100 80GB HBM3`` (older versions have no Group column).
_DEVICE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+"
                     r"(?P<host>\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(?P<model>.+?)\s*$")

#: GPU model words as nccl-tests prints them -> catalog GPU, most specific first.
_GPU_WORDS = (("gb300", "gb300"), ("b300", "b300"), ("gh200", "gh200"),
              ("gb200", "gb200"), ("b200", "b200"), ("h200", "h200-sxm"),
              ("h800", "h800-sxm"), ("h100 pcie", "h100-pcie"), ("h100", "h100-sxm"),
              ("h20", "h20"), ("a800", "a800-sxm"), ("a100-sxm4-40gb", "a100-sxm-40gb"),
              ("a100", "a100-sxm"), ("v100", "v100-sxm"), ("l40s", "l40s"))


def catalog_gpu(model: str) -> str | None:
    """The catalog GPU of a model name as nccl-tests prints it (None if unknown).

    Examples
    --------
    >>> catalog_gpu("NVIDIA A100-SXM4-80GB"), catalog_gpu("NVIDIA H100 80GB HBM3")
    ('a100-sxm', 'h100-sxm')
    >>> catalog_gpu("Tesla K80") is None
    True
    """
    low = model.lower()
    return next((gpu for word, gpu in _GPU_WORDS if word in low), None)


def check_system_gpu(system: str, model: str) -> None:
    """Refuse ``system`` when its GPU is not the one a log ran on (``model``, as
    nccl-tests prints it): a ConfigError naming --system and the systems with that GPU.
    A GPU the catalog does not know cannot be checked and passes.

    >>> check_system_gpu("dgx-h100", "NVIDIA H100 80GB HBM3")
    >>> check_system_gpu("dgx-a100", "NVIDIA H100 80GB HBM3")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --system: --system dgx-a100 has a100-sxm GPUs but the \
log ran on 'NVIDIA H100 80GB HBM3' (h100-sxm); drop --system or pass one with that GPU \
(dgx-h100, aws-p5)
    """
    from fabricsim.catalog import get_catalog

    cat = get_catalog()
    try:
        have = cat.system(system).gpu
    except UnknownPresetError as e:
        raise UnknownPresetError(e.message, field="--system") from None
    gpu = catalog_gpu(model)
    if gpu is not None and gpu != have:
        same = [name for name, s in cat.systems.items() if s.gpu == gpu]
        raise ConfigError(
            f"--system {system} has {have} GPUs but the log ran on {model!r} ({gpu}); drop "
            f"--system or pass one with that GPU" + (f" ({', '.join(same)})" if same else
                                                     ""), field="--system")


#: Largest log read (NCCL's INFO output for a few thousand ranks is tens of megabytes).
MAX_LOG_BYTES = 256 * 2**20


@dataclass(frozen=True)
class NcclDebugLog:
    """What an ``NCCL_DEBUG=INFO`` log says about the cluster it ran on."""

    version: str = ""
    hosts: tuple[str, ...] = ()
    ranks: int = 0
    nodes: int = 0
    gpus_per_node: int = 0
    gpu_model: str = ""
    nics: tuple[str, ...] = ()
    #: ``IB``, ``RoCE``, ``EFA``, ``cxi`` (Slingshot), ``Socket`` (TCP) or ``""`` when no
    #: network line was read
    link_layer: str = ""
    sharp: bool = False
    channels: int = 0
    nvls_channels: int = 0
    nvls: bool = False
    mnnvl: bool = False
    rings: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    lines: int = 0
    #: NIC line rate (Gb/s) where the source gives it (a topology dump); 0 otherwise
    nic_gbps: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"nccl_version": self.version, "hosts": list(self.hosts), "ranks": self.ranks,
                "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                "gpu_model": self.gpu_model, "nics": list(self.nics),
                "link_layer": self.link_layer, "sharp": self.sharp,
                "channels": self.channels, "nvls_channels": self.nvls_channels,
                "nvls": self.nvls, "mnnvl": self.mnnvl, "rings": len(self.rings),
                "warnings": list(self.warnings), "lines": self.lines,
                "nic_gbps": self.nic_gbps}


#: NCCL's topology ``sm`` attribute (compute capability x 10) -> catalog GPUs with it.
_SM_GPUS = {"70": ("v100-sxm",), "80": ("a100-sxm", "a100-sxm-40gb", "a800-sxm"),
            "90": ("h100-sxm", "h200-sxm", "h800-sxm", "h20", "h100-pcie", "gh200"),
            "100": ("b200", "gb200"), "103": ("b300", "gb300"), "89": ("l40s",)}


def read_topo_dump(text: str, name: str = "LOG") -> NcclDebugLog:
    """One server as NCCL's topology dump describes it (``NCCL_TOPO_DUMP_FILE``: XML with
    ``<gpu dev sm>`` and ``<net name speed>`` elements): its GPUs, their compute
    capability (``gpu_model`` is ``sm_90`` and the like: the dump names no model), and the
    NICs NCCL would use with their speed (Mb/s, in ``nic_gbps``). A file that is not such
    XML is a ConfigError naming ``name``."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ConfigError(f"not an NCCL topology dump: {e}", field=name) from None
    if root.tag != "system":
        raise ConfigError(f"not an NCCL topology dump: the root element is <{root.tag}>, "
                          f"NCCL writes <system>", field=name)
    gpus = root.findall(".//gpu")
    nets = root.findall(".//net")
    if not gpus:
        raise ConfigError("the topology dump lists no <gpu>: it is truncated", field=name)
    sms = sorted({g.get("sm", "") for g in gpus})
    speeds: set[int] = set()
    for n in nets:
        raw = n.get("speed", "0") or "0"
        try:
            v = float(raw)
        except ValueError:
            v = -1.0
        if not (0 <= v < 1e9):  # Mb/s; NaN and inf fail too
            raise ConfigError(f"<net name={n.get('name')!r}> has speed {raw!r}: NCCL writes "
                              f"the NIC's rate in Mb/s", field=name)
        if v > 0:
            speeds.add(int(v))
    speeds_sorted = sorted(speeds)
    return NcclDebugLog(ranks=len(gpus), nodes=1, gpus_per_node=len(gpus),
                        gpu_model=f"sm_{sms[0]}" if len(sms) == 1 and sms[0] else "",
                        nics=tuple(n.get("name", f"net{i}") for i, n in enumerate(nets)),
                        link_layer="IB" if nets else "", nic_gbps=speeds_sorted[-1] / 1000
                        if speeds_sorted else 0.0, lines=text.count("\n") + 1)


def read_nccl_debug(text: str, name: str = "LOG") -> NcclDebugLog:
    """The cluster facts in an ``NCCL_DEBUG=INFO`` log. A log from which the cluster's
    shape cannot be told (no ``comm ... nRanks`` line, no ``ncclCommInitRank`` line, no
    nccl-tests device list) is a ConfigError naming ``name``: it is truncated, or not
    INFO output."""
    version = ""
    hosts: dict[str, None] = {}
    dev_hosts: dict[str, None] = {}
    ranks = nodes = local = 0
    init_n = 0
    model = ""
    nics: tuple[str, ...] = ()
    layer = ""
    sharp = mnnvl = nvls = False
    channels = nvls_ch = 0
    rings: dict[int, tuple[int, ...]] = {}
    warns: list[str] = []
    n_lines = 0
    from fabricsim.interop.nccl_tests import strip_launcher_prefixes

    for raw in strip_launcher_prefixes(text).splitlines():
        n_lines += 1
        line = raw.rstrip()
        v = _VERSION.search(line)
        if v and not version:
            version = v.group("v")
        d = _DEVICE.match(line.strip())
        if d:
            dev_hosts[d.group("host")] = None
            model = model or d.group("model")
            continue
        m = _LINE.match(line.strip())
        if not m:
            continue
        hosts[m.group("host")] = None
        msg = m.group("msg").strip()
        if m.group("level") == "WARN":
            if len(warns) < 20:
                warns.append(f"{m.group('host')}: {msg[:200]}")
            continue
        if (c := _COMM.search(msg)) is not None:
            # a job builds many communicators (world, then DP/TP subgroups): the largest
            # is the cluster
            if int(c.group("n")) > ranks:
                ranks, nodes = int(c.group("n")), int(c.group("nodes"))
                local = int(c.group("local"))
            mnnvl = mnnvl or c.group("mnnvl") == "1"
        elif (i := _INIT.search(msg)) is not None:
            init_n = max(init_n, int(i.group("n")))
        elif (ib := _NET_IB.search(msg)) is not None:
            devs = list(_IB_DEV.finditer(ib.group("devs")))
            if devs:
                nics = tuple(x.group("name") for x in devs)
                layer = "RoCE" if all(x.group("layer") == "RoCE" for x in devs) else "IB"
                sharp = any(x.group("sharp") for x in devs)
        elif (ofi := _NET_OFI.search(msg)) is not None:
            layer = "EFA" if ofi.group("prov") == "efa" else ofi.group("prov")
            if ofi.group("n"):
                nics = tuple(f"{ofi.group('prov')}{k}" for k in range(int(ofi.group("n"))))
        elif (so := _NET_SOCKET.search(msg)) is not None and layer == "":
            layer = "Socket"
            nics = tuple(re.findall(r"\[\d+\]([^:\s]+)", so.group("devs")))
        elif (r := _RING.match(msg)) is not None:
            channels = max(channels, int(r.group("of")))
            rings[int(r.group("ch"))] = tuple(int(x) for x in r.group("order").split())
        elif (k := _COUNTS.search(msg)) is not None:
            channels = max(channels, int(k.group("coll")))
            nvls_ch = max(nvls_ch, int(k.group("nvls") or 0))
        elif _NVLS.search(msg):
            nvls = True
    all_hosts = tuple(dict.fromkeys([*dev_hosts, *hosts]))
    if not ranks and init_n:
        ranks = init_n
    if not ranks and dev_hosts:
        ranks = sum(1 for ln in text.splitlines() if _DEVICE.match(ln.strip()))
    if not ranks:
        raise ConfigError(
            f"no 'comm ... nRanks' or 'ncclCommInitRank' line and no nccl-tests "
            f"'Using devices' list in {n_lines} lines: the log is truncated or was not "
            f"written with NCCL_DEBUG=INFO (run again with NCCL_DEBUG=INFO and keep the whole "
            f"output)", field=name)
    if not nodes:
        nodes = len(all_hosts) or 1
    if not local:
        local = ranks // nodes if ranks % nodes == 0 else 0
    if local == 0:
        raise ConfigError(f"{ranks} ranks on {nodes} hosts is not the same number "
                          f"of GPUs on every host; fabricsim models servers alike",
                          field=name)
    return NcclDebugLog(version=version, hosts=all_hosts, ranks=ranks, nodes=nodes,
                        gpus_per_node=local, gpu_model=model, nics=nics, link_layer=layer,
                        sharp=sharp, channels=channels, nvls_channels=nvls_ch,
                        nvls=nvls or nvls_ch > 0, mnnvl=mnnvl, rings=rings,
                        warnings=tuple(warns), lines=n_lines)


#: The fabric preset a link layer maps to, by the system's own default when it has that
#: transport, else by the GPU generation's usual NIC.
_TRANSPORT = {"IB": "ib", "RoCE": "roce", "EFA": "srd", "Socket": "tcp", "cxi": "slingshot"}
#: Link layers only one family of systems has: a log over them picks among those.
_OWN_SYSTEMS = ("EFA", "cxi")


@dataclass(frozen=True)
class LogCluster:
    """A scenario's ``cluster:`` (and ``systems:``) sections rebuilt from a log, with the
    facts that came from the log and those the catalog supplied."""

    cluster: dict[str, Any]
    systems: dict[str, dict[str, Any]]
    from_log: dict[str, Any]
    assumed: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "systems": self.systems, "from_log": self.from_log,
                "assumed": self.assumed}


def cluster_of(log: NcclDebugLog, system: str | None = None) -> LogCluster:
    """The cluster ``log`` ran on, as scenario sections. ``system`` (a preset) is needed
    when the log names no GPU model (NCCL's INFO lines do not; nccl-tests' device list
    does); a system whose GPU is not the log's is refused. NIC speeds are not in the log:
    the preset's are used, and a NIC count other than the preset's makes a user system
    (``systems: {<system>-from-log: {base: <system>, nics: N}}``)."""
    from fabricsim.catalog import get_catalog
    cat = get_catalog()
    assumed: dict[str, str] = {}
    if system is None and log.gpu_model.startswith("sm_"):
        sm_of = _SM_GPUS.get(log.gpu_model[3:], ())
        raise ConfigError(f"the topology dump gives the GPUs' compute capability "
                          f"({log.gpu_model}: {', '.join(sm_of) or 'no catalog GPU'}), not "
                          f"their model; pass --system", field="--system")
    if system is None:
        if not log.gpu_model:
            raise ConfigError("the log names no GPU model (NCCL's INFO lines do not; an "
                              "nccl-tests run prints it under 'Using devices'); pass --system",
                              field="--system")
        gpu = catalog_gpu(log.gpu_model)
        want = _TRANSPORT[log.link_layer] if log.link_layer in _OWN_SYSTEMS else None
        cands = [n for n, s in cat.systems.items() if s.gpu == gpu
                 and (want is None or cat.fabric(s.default_fabric).transport == want)
                 and (want is not None or not n.startswith("aws-"))]
        if not cands:
            net = f" over its {log.link_layer} network" if want else ""
            raise ConfigError(f"the log's GPU {log.gpu_model!r} has no preset system{net}; "
                              f"pass --system (a system of that GPU, or a user-defined one "
                              f"in a scenario's systems:)", field="--system")
        fits = [n for n in cands if cat.system(n).gpus >= log.gpus_per_node]
        system = (fits or cands)[0]
        assumed["system"] = f"the preset with the log's GPU ({log.gpu_model})"
    else:
        if log.gpu_model.startswith("sm_"):
            sm_gpus = _SM_GPUS.get(log.gpu_model[3:], ())
            if cat.system(system).gpu not in sm_gpus:
                raise ConfigError(f"--system {system} has {cat.system(system).gpu} GPUs but "
                                  f"the dump's are {log.gpu_model} ({', '.join(sm_gpus)})",
                                  field="--system")
        elif log.gpu_model:
            check_system_gpu(system, log.gpu_model)
        assumed["system"] = "given (--system)"
    spec = cat.system(system)
    if log.gpus_per_node > spec.gpus:
        raise ConfigError(f"the log has {log.gpus_per_node} GPUs per host; {system} has "
                          f"{spec.gpus}: pass a --system with at least that many",
                          field="--system")
    cluster: dict[str, Any] = {"system": system, "nodes": log.nodes}
    if log.gpus_per_node != spec.gpus:
        cluster["gpus_per_node"] = log.gpus_per_node
    systems: dict[str, dict[str, Any]] = {}
    nics = len(log.nics)
    if log.gpu_model.startswith("sm_") and log.nics:
        assumed["link layer"] = ("InfiniBand: NCCL's topology dump names no link layer "
                                 "(pass --fabric for RoCE)")
    if (log.nodes > 1 or log.nic_gbps > 0) and log.link_layer in _TRANSPORT:
        have = cat.fabric(spec.default_fabric).transport
        want = _TRANSPORT[log.link_layer]
        speed = round(log.nic_gbps or spec.nic_gbit_s)
        said = "the dump's" if log.nic_gbps else f"{system}'s"
        if have == want and speed == round(spec.nic_gbit_s):
            fabric = spec.default_fabric
            assumed["fabric"] = (f"{fabric}: {system}'s own"
                                 + ("" if log.nic_gbps else " (NCCL prints no NIC speed)"))
        else:
            # an NCCL log comes from GPUs: not the data-centre network of TPU hosts
            tpu_only = ({x.default_fabric for x in cat.systems.values() if x.ici_host_shape}
                        - {x.default_fabric for x in cat.systems.values()
                           if not x.ici_host_shape})
            same = [(abs(f.port_gbit_s - speed), n) for n, f in cat.fabrics.items()
                    if f.transport == want and n not in tpu_only]
            fabric = min(same)[1]
            assumed["fabric"] = (f"{fabric}: the {log.link_layer} link layer at {said} NIC "
                                 f"speed, {speed} Gb/s")
        cluster["fabric"] = fabric
        over: dict[str, Any] = {}
        if nics and log.link_layer != "EFA" and nics != spec.nics:
            over["nics"] = nics
        if log.nic_gbps and speed != round(spec.nic_gbit_s):
            over["nic_gbit_s"] = speed
        if over:
            name = f"{system}-from-log"
            systems[name] = {"base": system, **over}
            cluster["system"] = name
        if log.sharp and want == "ib":
            cluster["params"] = {"sharp": True}
    from_log = {"nodes": log.nodes, "gpus_per_node": log.gpus_per_node,
                "network": log.link_layer or "none read", "nics_per_node": nics,
                "sharp": log.sharp, "channels": log.channels, "nvls": log.nvls,
                "nccl_version": log.version or "not printed"}
    return LogCluster(cluster=cluster, systems=systems, from_log=from_log, assumed=assumed)
