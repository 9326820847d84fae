"""A training step's work and communication as Chakra execution traces (ASTRA-sim's input).

:func:`step_trace` lays out, for one rank of each pipeline stage, one training step of a
:class:`~fabricsim.workloads.training.step.StepResult`'s job as a chain of nodes: per micro-batch
the forward compute layer by layer, each layer's tensor-parallel all-gather and
reduce-scatter, the activation send to the next stage; the backward the same way in
reverse; then the data-parallel gradient
reduce-scatter and parameter all-gather (expert all-to-all where the model has experts).
Compute nodes carry their modelled duration; collective nodes their type and bytes, so
ASTRA-sim (or any Chakra consumer) can time the communication on its own network and
compare with fabricsim's.

:func:`write_traces` writes them in Chakra's file format: per rank ``<prefix>.<rank>.et``,
a length-delimited ``GlobalMetadata`` message followed by ``Node`` messages, with the
field numbers of Chakra's schema (``mlcommons/chakra``, ``schema/protobuf/et_def.proto``).
Messages are built with the protobuf runtime (the ``chakra`` extra) from a descriptor
fabricsim declares itself: the subset of the schema it writes.

Example
-------
>>> nodes = [TraceNode(0, "fwd", "COMP_NODE", duration_us=120.0),
...          TraceNode(1, "tp all_gather", "COMM_COLL_NODE", deps=(0,),
...                    comm_type="ALL_GATHER", comm_bytes=2**20)]
>>> nodes[1].comm_type, nodes[1].deps
('ALL_GATHER', (0,))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricsim._extras import require
from fabricsim.errors import ConfigError

__all__ = [
    "COMM_TYPES",
    "NODE_TYPES",
    "TraceNode",
    "read_traces",
    "step_trace",
    "write_traces",
]

#: Chakra's NodeType values (et_def.proto).
NODE_TYPES = {"COMP_NODE": 4, "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6,
              "COMM_COLL_NODE": 7}
#: Chakra's CollectiveCommType values.
COMM_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "BROADCAST": 5,
              "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7}
#: Version string written in GlobalMetadata.
SCHEMA_VERSION = "0.0.4"


@dataclass(frozen=True)
class TraceNode:
    """One node of a rank's trace (ids are unique per rank; ``deps`` are data deps)."""

    id: int
    name: str
    type: str
    deps: tuple[int, ...] = ()
    duration_us: float = 0.0
    comm_type: str = ""
    comm_bytes: int = 0
    peer: int = -1


def _messages() -> tuple[Any, Any]:
    """(GlobalMetadata, Node) message classes built from fabricsim's own descriptor."""
    require("google.protobuf", "chakra", "Chakra trace export")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="fabricsim_chakra_subset.proto",
                                           package="ChakraProtoMsg", syntax="proto3")
    t = descriptor_pb2.FieldDescriptorProto

    def msg(name: str, fields: list[tuple[str, int, int, int, str]],
            oneof: tuple[str, ...] = ()) -> None:
        m = f.message_type.add(name=name)
        if oneof:  # Chakra's 'value' oneof: presence kept, so False and 0 are written
            m.oneof_decl.add(name="value")
        for fname, num, ftype, label, tname in fields:
            fd = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                fd.type_name = tname
            if fname in oneof:
                fd.oneof_index = 0

    opt, rep = t.LABEL_OPTIONAL, t.LABEL_REPEATED
    msg("AttributeProto", [("name", 1, t.TYPE_STRING, opt, ""),
                           ("int64_val", 9, t.TYPE_INT64, opt, ""),
                           ("uint64_val", 13, t.TYPE_UINT64, opt, ""),
                           ("bool_val", 27, t.TYPE_BOOL, opt, ""),
                           ("string_val", 29, t.TYPE_STRING, opt, "")],
        oneof=("int64_val", "uint64_val", "bool_val", "string_val"))
    msg("GlobalMetadata", [("version", 1, t.TYPE_STRING, opt, ""),
                           ("attr", 2, t.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto")])
    msg("Node", [("id", 1, t.TYPE_UINT64, opt, ""), ("name", 2, t.TYPE_STRING, opt, ""),
                 ("type", 3, t.TYPE_INT32, opt, ""),
                 ("ctrl_deps", 4, t.TYPE_UINT64, rep, ""),
                 ("data_deps", 5, t.TYPE_UINT64, rep, ""),
                 ("start_time_micros", 6, t.TYPE_UINT64, opt, ""),
                 ("duration_micros", 7, t.TYPE_UINT64, opt, ""),
                 ("attr", 10, t.TYPE_MESSAGE, rep, ".ChakraProtoMsg.AttributeProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    meta = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("ChakraProtoMsg.GlobalMetadata"))
    node = message_factory.GetMessageClass(pool.FindMessageTypeByName("ChakraProtoMsg.Node"))
    return meta, node


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def write_traces(traces: Mapping[int, Sequence[TraceNode]], prefix: Path,
                 attrs: dict[str, str] | None = None) -> list[Path]:
    """Write one ``<prefix>.<rank>.et`` file per rank; returns the paths."""
    meta_cls, node_cls = _messages()
    prefix.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for rank, nodes in sorted(traces.items()):
        meta = meta_cls(version=SCHEMA_VERSION)
        for k, v in (attrs or {}).items():
            meta.attr.add(name=k, string_val=str(v))
        chunks = [meta.SerializeToString()]
        for n in nodes:
            if n.type not in NODE_TYPES:
                raise ConfigError(f"unknown Chakra node type {n.type!r}", field="type")
            m = node_cls(id=n.id, name=n.name, type=NODE_TYPES[n.type],
                         duration_micros=round(n.duration_us))
            m.data_deps.extend(n.deps)
            m.attr.add(name="is_cpu_op", bool_val=False)
            if n.type == "COMM_COLL_NODE":
                m.attr.add(name="comm_type", int64_val=COMM_TYPES[n.comm_type])
                m.attr.add(name="comm_size", int64_val=int(n.comm_bytes))
            elif n.type in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                m.attr.add(name="comm_size", int64_val=int(n.comm_bytes))
                m.attr.add(name="comm_dst" if n.type == "COMM_SEND_NODE" else "comm_src",
                           int64_val=int(n.peer))
                m.attr.add(name="comm_tag", int64_val=int(n.id))
            chunks.append(m.SerializeToString())
        path = prefix.with_name(f"{prefix.name}.{rank}.et")
        path.write_bytes(b"".join(_varint(len(c)) + c for c in chunks))
        out.append(path)
    return out


def read_traces(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read one ``.et`` file back (metadata, nodes as dicts): for checking a written
    trace, and for a quick look at one from elsewhere."""
    from google.protobuf.json_format import MessageToDict

    meta_cls, node_cls = _messages()
    buf = path.read_bytes()
    i, items = 0, []
    while i < len(buf):
        n, i = _read_varint(buf, i)
        items.append(buf[i:i + n])
        i += n
    if not items:
        raise ConfigError(f"{path} holds no Chakra messages", field="path")
    meta = MessageToDict(meta_cls.FromString(items[0]))
    nodes = [MessageToDict(node_cls.FromString(x), always_print_fields_with_no_presence=True)
             for x in items[1:]]
    return meta, nodes


def step_trace(result: Any, model: Any, *, stage: int = 0) -> list[TraceNode]:
    """One training step of ``result`` (a :class:`~fabricsim.workloads.training.step.StepResult`)
    for a rank of pipeline stage ``stage``, as :class:`TraceNode` s (module docstring)."""
    par = result.parallel
    tp, pp, m_micro = par["tp"], par["pp"], par["num_micro"]
    if par.get("pp_schedule", "1f1b") != "1f1b":
        raise ConfigError("Chakra traces are written for 1F1B pipelines; DualPipe's two "
                          "directions are not exported: use pp_schedule='1f1b'",
                          field="pp_schedule")
    if not 0 <= stage < pp:
        raise ConfigError(f"stage must be in 0..{pp - 1}, got {stage}", field="stage")
    b, s, h = par["micro_batch"], par["seq_len"], model.hidden
    layers = par["stage_layers"][stage] if par.get("stage_layers") else model.layers // pp
    act = b * s * h * 2 // max(par.get("cp", 1), 1)
    compute = result.breakdown["compute"] / max(m_micro, 1) * 1e6   # us per micro-batch
    fwd_us, bwd_us = compute / 3.0, compute * 2.0 / 3.0
    nodes: list[TraceNode] = []

    def add(name: str, kind: str, **kw: Any) -> int:
        nid = len(nodes)
        deps = (nid - 1,) if nid else ()
        nodes.append(TraceNode(nid, name, kind, deps=deps, **kw))
        return nid

    per_layer_f, per_layer_b = fwd_us / max(layers, 1), bwd_us / max(layers, 1)

    def layer_comm(mb: int, i: int, phase: str) -> None:
        if tp > 1:  # sequence parallelism: an all-gather and a reduce-scatter per block
            for kind in ("ALL_GATHER", "REDUCE_SCATTER"):
                add(f"mb{mb} {phase} layer{i} tp {kind.lower()}", "COMM_COLL_NODE",
                    comm_type=kind, comm_bytes=act)

    for mb in range(m_micro):
        if stage > 0:
            add(f"mb{mb} recv activations", "COMM_RECV_NODE", comm_bytes=act // tp,
                peer=stage - 1)
        for i in range(layers):
            add(f"mb{mb} forward layer{i}", "COMP_NODE", duration_us=per_layer_f)
            layer_comm(mb, i, "forward")
        if stage < pp - 1:
            add(f"mb{mb} send activations", "COMM_SEND_NODE", comm_bytes=act // tp,
                peer=stage + 1)
    for mb in range(m_micro):
        if stage < pp - 1:
            add(f"mb{mb} recv gradients", "COMM_RECV_NODE", comm_bytes=act // tp,
                peer=stage + 1)
        for i in reversed(range(layers)):
            add(f"mb{mb} backward layer{i}", "COMP_NODE", duration_us=per_layer_b)
            layer_comm(mb, i, "backward")
        if par.get("ep", 1) > 1:
            add(f"mb{mb} expert all-to-all", "COMM_COLL_NODE", comm_type="ALL_TO_ALL",
                comm_bytes=b * s * h * 2 * max(model.top_k, 1))
        if stage > 0:
            add(f"mb{mb} send gradients", "COMM_SEND_NODE", comm_bytes=act // tp,
                peer=stage - 1)
    if par["dp"] > 1:
        shard = model.params / (tp * pp)  # gradients in their reduce dtype, weights BF16
        add("dp gradient reduce-scatter", "COMM_COLL_NODE", comm_type="REDUCE_SCATTER",
            comm_bytes=int(shard * (4 if par.get("grad_reduce_dtype") == "fp32" else 2)))
        add("dp parameter all-gather", "COMM_COLL_NODE", comm_type="ALL_GATHER",
            comm_bytes=int(shard * 2))
    add("optimizer", "COMP_NODE", duration_us=result.breakdown["optimizer"] * 1e6)
    return nodes
