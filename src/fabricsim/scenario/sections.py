"""The sections of a scenario that describe a job, read once into typed models.

``training:`` is a :class:`TrainingSection`: a model (a preset's name and any of its
shape fields), every field of
:class:`~fabricsim.workloads.training.parallel.ParallelConfig` (the layout, batch,
precision, recomputation, overlap), the run's price and length, the backend, the goodput's
checkpoint bandwidth and restart time, and a pasted Megatron-LM/NeMo argument list.
``inference:`` is a :class:`ServingSection`: a model and every field of
:class:`~fabricsim.workloads.serving.config.ServingConfig`. Both are flat, as they are
written, and their field names are the command line's flags (``vp`` is ``--vp``,
``tpot_target_ms`` is ``--tpot-target-ms``).

A section is also what command-line flags make: the flags given, as a section of their
own, laid over the scenario's with :meth:`TrainingSection.over`. Which fields a section
gives is pydantic's ``model_fields_set``; :meth:`TrainingSection.given` lists them.

Megatron lists merge one way everywhere: inside one layer (a scenario's section, or the
command line), the layer's own keys win over its pasted list; a later layer (the command
line) wins over an earlier one (the file), its list included.

Example
-------
>>> s = TrainingSection.model_validate({"model": "llama3-70b", "pp": 2, "from_megatron":
...     "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --lr 1e-4"})
>>> s.tp, s.pp, s.megatron_notes()
(8, 2, ['training.from_megatron ignored (no effect on the step time): --lr 1e-4'])
>>> s.over(TrainingSection.model_validate({"tp": 4})).tp
4
>>> parse_section(TrainingSection, {"model": "llama2-7b", "tp": 0}, "training")
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: training.tp: Input should be greater than or equal to 1, got 0
"""

from __future__ import annotations

import contextlib
import difflib
import math
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fabricsim._strict import StrictModel
from fabricsim.backends.packet.config import PacketConfig, parse_packet_config
from fabricsim.errors import ConfigError
from fabricsim.workloads.models import (
    ModelShape,
    TransformerSpec,
    custom_model,
    get_model,
)
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.training.parallel import ParallelConfig

__all__ = ["KEY_ALIASES", "MAX_GPU_HOUR_USD", "SECTION_TYPES", "PacketSection",
           "ServingSection",
           "TrainingSection",
           "check_non_negative", "check_positive", "field_name", "parse_section",
           "section_error"]

#: Highest price of a GPU-hour taken (a GPU-hour costs dollars, not 1e308 of them).
MAX_GPU_HOUR_USD = 10_000.0
#: Fields a section takes in a unit that YAML 1.1 reads as text when written like
#: ``1.5e12`` (no sign in the exponent): read as numbers.
_NUMBERS = ("gpu_hour_usd", "total_tokens", "checkpoint_gbps", "restart_min",
            "tpot_target_ms")

_S = TypeVar("_S", bound=BaseModel)


def field_name(key: str, where: str) -> str:
    """How an error names the field ``key`` of a section read from ``where``: a scenario
    section (``training.tp``) or the command line (``--tp``: one vocabulary, the field's
    name with dashes).

    >>> field_name("tp", "training"), field_name("seq_len", "--")
    ('training.tp', '--seq-len')
    """
    if where == "--":
        return "--" + key.split(".")[0].replace("_", "-")
    return f"{where}.{key}" if key else where


def _where(info: ValidationInfo | None, default: str) -> str:
    ctx = info.context if info is not None else None
    return str(ctx.get("where", default)) if isinstance(ctx, Mapping) else default


def _numbers(data: dict[str, Any]) -> dict[str, Any]:
    """YAML 1.1 reads ``1.5e12`` as text: such values of :data:`_NUMBERS` as floats."""
    for k in _NUMBERS:
        if isinstance(data.get(k), str):
            with contextlib.suppress(ValueError):
                data[k] = float(data[k])
    return data


class _ModelFields(ModelShape):
    """A model: a preset's name (``model``) and any shape field changed."""

    model: str | None = Field(None, min_length=1, max_length=200)

    def build_model(self, default: str | TransformerSpec, where: str) -> TransformerSpec:
        """The model: the preset ``model`` (else ``default``, a name or a model) with the
        shape fields given changed; a shape without a preset is a whole custom model.
        Errors name ``<where>.<field>``."""
        shape = ModelShape.model_validate(self.given_shape())
        if self.model is not None:
            base: TransformerSpec | None = get_model(self.model, field=field_name("model", where))
        elif not shape.given():
            base = default if isinstance(default, TransformerSpec) else get_model(default)
        elif isinstance(default, TransformerSpec):
            base = default
        else:
            base = None
        if not shape.given():
            assert base is not None
            return base
        return custom_model(base, shape, prefix=where if where != "--" else "training")

    def given_shape(self) -> dict[str, Any]:
        """The shape fields given, by name."""
        return ModelShape.given(self)

    def names_model(self) -> bool:
        """Whether a preset or any shape field is given."""
        return self.model is not None or bool(self.given_shape())


def _torchtitan() -> Any:
    from fabricsim.workloads.training.torchtitan import read_torchtitan

    return read_torchtitan


def _maxtext() -> Any:
    from fabricsim.workloads.training.maxtext import read_maxtext

    return read_maxtext


def _nemo() -> Any:
    from fabricsim.workloads.training.nemo import read_nemo

    return read_nemo


#: Other frameworks' configurations a training section reads whole (the field holds the
#: file's or the command line's text), each with the reader that turns it into the
#: section's fields.
_CONFIG_READERS = {"from_torchtitan": _torchtitan, "from_maxtext": _maxtext,
                   "from_nemo": _nemo}


class TrainingSection(ParallelConfig, _ModelFields):
    """A scenario's ``training:`` section (or the training flags given on a command line).

    Every field of :class:`~fabricsim.workloads.training.parallel.ParallelConfig` and of
    the model's shape (:data:`~fabricsim.workloads.models.MODEL_FIELDS`), and:

    model : str or None
        A model preset (``fabricsim presets``); ``None`` with no shape field: llama3-8b.
    backend : {"analytic", "flow"} or None
        Where collective times come from (``None``: analytic).
    whole_fabric : bool or None
        With the flow backend: run every sibling group of each part of the step at once
        on the fabric (:class:`~fabricsim.workloads.wholefabric.WholeFabricComm`)
        instead of one group alone by shape.
    flow_precision : float or None
        The flow backend's event coalescing for ``whole_fabric`` runs (``None``: 1e-3;
        0: exact).
    gpu_hour_usd : float or None
        Price of a GPU-hour (``None``: the scenario's, else the system preset's).
    total_tokens : float or None
        Tokens of the whole run, for its length and cost.
    checkpoint_gbps, restart_min : float or None
        The goodput's checkpoint write bandwidth (GB/s) and restart time (minutes).
    from_megatron : str or None
        A Megatron-LM/NeMo argument list, pasted as one string; the section's own keys
        win over it.
    from_torchtitan, from_maxtext : str or None
        A torchtitan job config (its TOML text) or a MaxText config (its YAML text;
        ``--from-torchtitan FILE`` and ``--from-maxtext FILE`` read the file); the
        section's own keys win over it.
    from_nemo : str or None
        A NeMo 2 / Megatron-Bridge recipe command line (``--factory llama3_8b
        trainer.strategy.tensor_model_parallel_size=4 ...``), pasted as one string; the
        section's own keys win over it.

    >>> TrainingSection.model_validate({"model": "llama3-8b", "vp": 2}).given()
    {'model': 'llama3-8b', 'vp': 2}
    """

    backend: Literal["analytic", "flow"] | None = None
    whole_fabric: bool | None = None
    flow_precision: float | None = Field(None, ge=0.0, le=0.1)
    gpu_hour_usd: float | None = None
    total_tokens: float | None = None
    checkpoint_gbps: float | None = None
    restart_min: float | None = None
    from_megatron: str | None = Field(None, max_length=100_000)
    from_torchtitan: str | None = Field(None, max_length=1_000_000)
    from_maxtext: str | None = Field(None, max_length=1_000_000)
    from_nemo: str | None = Field(None, max_length=100_000)

    @field_validator("gpu_hour_usd", "total_tokens", "checkpoint_gbps", mode="before")
    @classmethod
    def _positive(cls, v: object) -> object:
        return _number(v, zero_ok=False)

    @field_validator("restart_min", mode="before")
    @classmethod
    def _non_negative(cls, v: object) -> object:
        return _number(v, zero_ok=True)

    @field_validator("gpu_hour_usd")
    @classmethod
    def _price(cls, v: float | None) -> float | None:
        if v is not None and v > MAX_GPU_HOUR_USD:  # dollars that overflow mean nothing
            raise ValueError(f"must be at most {MAX_GPU_HOUR_USD:,.0f} $ per GPU-hour, got "
                             f"{v:g}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _pasted(cls, data: Any, info: ValidationInfo) -> Any:
        """Numbers YAML read as text; a pasted Megatron list's fields under the
        section's own keys."""
        if not isinstance(data, Mapping):
            return data
        data = _numbers(dict(data))
        given = [k for k in (*_CONFIG_READERS, "from_megatron") if data.get(k) is not None]
        if len(given) > 1:
            raise ConfigError(f"{' and '.join(given)} both given: give one framework's "
                              f"configuration", field=field_name(given[0],
                                                                 _where(info, "training")))
        for key, reader in _CONFIG_READERS.items():
            text = data.get(key)
            if text is None:
                continue
            field = field_name(key, _where(info, "training"))
            if not isinstance(text, str):
                raise ConfigError(f"must be the configuration's text, got {text!r}",
                                  field=field)
            try:
                cfg = reader()(text)
            except ConfigError as e:
                raise ConfigError(e.message, field=field) from None
            return {**cfg.fields, **data}
        pasted = data.get("from_megatron")
        if pasted is None:
            return data
        where = _where(info, "training")
        field = field_name("from_megatron", where)
        if not isinstance(pasted, str):
            raise ConfigError(f"must be the argument list as one string, got {pasted!r}",
                              field=field)
        from fabricsim.workloads.training.megatron import parse_megatron_args

        try:
            args = parse_megatron_args(pasted)
        except ConfigError as e:
            raise ConfigError(e.message, field=field) from None
        return {**args.fields, **data}

    def parallel(self) -> ParallelConfig:
        """The layout alone (the :class:`ParallelConfig` fields given)."""
        keys = set(ParallelConfig.model_fields) & self.model_fields_set
        return ParallelConfig.model_validate({k: getattr(self, k) for k in keys})

    def given(self) -> dict[str, Any]:
        """The fields given, by name (what a layer adds when laid over another)."""
        return {k: getattr(self, k) for k in type(self).model_fields
                if k in self.model_fields_set}

    def over(self, top: TrainingSection) -> TrainingSection:
        """This section with ``top``'s fields laid over it (a command line over a file).
        ``top``'s pasted Megatron list has been merged under its own keys already, so it
        wins over this section's fields too."""
        merged = {**self.given(), **top.given()}
        keys = ("from_megatron", *_CONFIG_READERS)
        mine = [k for k in keys if getattr(self, k)]
        theirs = [k for k in keys if getattr(top, k)]
        if mine and theirs and set(mine) != set(theirs):
            raise ConfigError(f"{theirs[0]} given over a section with {mine[0]}: two "
                              f"frameworks' configurations would mix; give one",
                              field=field_name(theirs[0], "training"))
        for k in keys:
            merged.pop(k, None)
        out = type(self).model_validate(merged)
        texts = {k: getattr(top, k) or getattr(self, k) for k in keys}
        return out.model_copy(update={k: v for k, v in texts.items() if v})

    def megatron_notes(self, where: str = "training") -> list[str]:
        """What the pasted list's reading derived (an FFN width, a padded vocabulary, the
        launcher's cluster) and its arguments with no effect on the step time, as notes
        (a torchtitan config's alike)."""
        for key, reader in _CONFIG_READERS.items():
            text = getattr(self, key)
            if not text:
                continue
            cfg = reader()(text)
            tname = field_name(key, where)
            notes = [f"{tname}: {a}" for a in cfg.applied]
            if cfg.ignored:
                notes.append(f"{tname} ignored (no effect on the step time): "
                             f"{', '.join(cfg.ignored)}")
            return notes
        if not self.from_megatron:
            return []
        from fabricsim.workloads.training.megatron import read_megatron_line

        line = read_megatron_line(self.from_megatron)
        name = field_name("from_megatron", where)
        out = [f"{name}: {a}" for a in line.applied]
        if line.args.ignored:
            out.append(f"{name} ignored (no effect on the step time): "
                       f"{', '.join(line.args.ignored)}")
        return out

    def megatron_launcher(self) -> dict[str, int]:
        """The cluster the pasted list's launcher prefix names (``torchrun --nnodes N
        --nproc_per_node G``; a NeMo line's ``trainer.num_nodes``/``trainer.devices``),
        ``{}`` without one."""
        if self.from_nemo:
            from fabricsim.workloads.training.nemo import read_nemo

            return dict(read_nemo(self.from_nemo).launcher)
        if not self.from_megatron:
            return {}
        from fabricsim.workloads.training.megatron import read_megatron_line

        return dict(read_megatron_line(self.from_megatron).launcher)


class ServingSection(ServingConfig, _ModelFields):
    """A scenario's ``inference:`` section (or ``fabricsim infer``'s flags): a model, as in
    ``training:``, every field of
    :class:`~fabricsim.workloads.serving.config.ServingConfig`, and the ``backend``
    (``analytic``, or ``flow`` to serve with the scenario's faults and traffic).

    >>> s = ServingSection.model_validate({"model": "llama3-70b", "tp": 4})
    >>> s.config().tp, s.given()
    (4, {'model': 'llama3-70b', 'tp': 4})
    """

    backend: Literal["analytic", "flow"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _numbers(cls, data: Any) -> Any:
        """Numbers YAML read as text; ``tpot_target`` is read as ``tpot_target_ms``."""
        if not isinstance(data, Mapping):
            return data
        from fabricsim._strict import renamed_keys

        return _numbers(renamed_keys(dict(data), {"tpot_target": "tpot_target_ms"},
                                     "inference"))

    def config(self) -> ServingConfig:
        """The serving layout alone (the :class:`ServingConfig` fields given)."""
        keys = set(ServingConfig.model_fields) & self.model_fields_set
        return ServingConfig.model_validate({k: getattr(self, k) for k in keys})

    def given(self) -> dict[str, Any]:
        """The fields given, by name."""
        return {k: getattr(self, k) for k in type(self).model_fields
                if k in self.model_fields_set}

    def over(self, top: ServingSection) -> ServingSection:
        """This section with ``top``'s fields laid over it."""
        return type(self).model_validate({**self.given(), **top.given()})


def merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """``over`` deep-merged into a copy of ``base`` (mappings merge, anything else is
    replaced).

    >>> merge({"pfc": {"xoff": 1, "xon": 2}, "mtu": 4096}, {"pfc": {"xon": 3}})
    {'pfc': {'xoff': 1, 'xon': 3}, 'mtu': 4096}
    """
    out = dict(base)
    for k, v in over.items():
        old = out.get(k)
        out[k] = merge(old, v) if isinstance(v, Mapping) and isinstance(old, Mapping) else v
    return out


class PacketSection(StrictModel):
    """A scenario's ``packet:`` section: the base configuration and every variant (the
    base with the variant's overrides merged in), each a validated
    :class:`~fabricsim.backends.packet.config.PacketConfig`. Written as one mapping of
    packet settings with a ``variants:`` mapping of name to overrides; errors name
    ``packet.<field>`` (a variant's, ``packet.variants.<name>.<field>``).

    >>> s = PacketSection.model_validate({"mtu": 1024, "variants": {"big": {"mtu": 4096}}})
    >>> s.base.mtu, s.config("big").mtu, s.names()
    (1024, 4096, ['big'])
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: PacketConfig
    variants: dict[str, PacketConfig] = Field(default_factory=dict)
    raw_variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each variant's overrides as written (a run can lay more over them)."""

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("base"), PacketConfig):
            return data  # already read
        raw = dict(data or {}) if isinstance(data, Mapping) else data
        if not isinstance(raw, dict):
            raise ConfigError(f"the packet section is a mapping of packet settings, got "
                              f"{type(raw).__name__}", field="packet")
        variants = raw.pop("variants", None) or {}
        if not isinstance(variants, Mapping):
            raise ConfigError("variants must map a name to packet overrides",
                              field="packet.variants")
        base = parse_packet_config(raw)  # the base's own errors first
        out: dict[str, PacketConfig] = {}
        for name, over in variants.items():
            if not isinstance(over, Mapping):
                raise ConfigError("a variant is a mapping of packet overrides",
                                  field=f"packet.variants.{name}")
            try:
                out[str(name)] = parse_packet_config(merge(raw, over))
            except ConfigError as e:
                raise ConfigError(f"{e.message} (in variant {name!r})", field=(
                    e.field or "packet").replace("packet.", f"packet.variants.{name}.", 1)
                    ) from None
        return {"base": base, "variants": out,
                "raw_variants": {str(k): dict(v) for k, v in variants.items()}}

    def names(self) -> list[str]:
        """The variants' names, in the order written."""
        return list(self.variants)

    def config(self, variant: str | None = None) -> PacketConfig:
        """The configuration of ``variant`` (``None``: the base); an unknown name is an
        error listing the variants."""
        if variant is None:
            return self.base
        if variant not in self.variants:
            from fabricsim.errors import unknown

            raise unknown("variant", variant, list(self.variants), field="packet.variants")
        return self.variants[variant]

    def with_settings(self, variant: str | None, **settings: object) -> PacketConfig:
        """:meth:`config` of ``variant`` with ``settings`` laid over it and checked again
        (a command line's ``--event-budget``)."""
        cfg = self.config(variant)
        if not settings:
            return cfg
        return parse_packet_config(merge(cfg.model_dump(exclude_unset=True), settings))


#: The job sections of a scenario and their types (``training:``, ``inference:``).
SECTION_TYPES: dict[str, type[BaseModel]] = {"training": TrainingSection,
                                             "inference": ServingSection}

#: Section keys people write for a field by another name (a Megatron argument's, a
#: framework's), and the field (or setting) they mean.
KEY_ALIASES = {
    "virtual_pipeline_model_parallel_size": "vp", "schedule": "pp_schedule",
    "fp8": "precision: fp8", "fp4": "precision: fp4", "sp": "sequence_parallel",
    "recompute_num_layers": "recompute_layers", "recompute_granularity": "recompute",
    "global_batch_size": "global_batch", "micro_batch_size": "micro_batch",
    "gbs": "global_batch", "mbs": "micro_batch", "seq_length": "seq_len",
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep",
    "max_num_seqs": "max_batch",
}


def key_hint(key: str, known: set[str]) -> str:
    """What to say of an unknown key: the field meant (:data:`KEY_ALIASES`, or the
    closest spelling) and the known fields.

    >>> key_hint("mbs", {"micro_batch", "tp"})
    '; did you mean micro_batch? (known fields: micro_batch, tp)'
    """
    k = key.replace("-", "_").lower()
    meant = KEY_ALIASES.get(k)
    if meant is None or meant.split()[0].rstrip(":") not in known:
        close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.75)
        meant = close[0] if close else None
    return (f"; did you mean {meant}?" if meant else "") + \
        f" (known fields: {', '.join(sorted(known))})"


def section_error(e: ValidationError, where: str, model: type[BaseModel]) -> ConfigError:
    """The first error of validating a section of type ``model`` read from ``where``
    (:func:`field_name`); an unknown key gets the field meant (:func:`key_hint`)."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    got = err.get("input")
    got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) \
        and ", got " not in str(err["msg"]) else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    hint = key_hint(loc, set(model.model_fields)) if err["type"] == "extra_forbidden" else ""
    return ConfigError(f"{msg}{got_s}{hint}", field=field_name(loc, where) if loc else where)


def parse_section(model: type[_S], data: Any, where: str) -> _S:
    """``data`` validated as a section of type ``model``; errors name ``<where>.<field>``
    (:func:`field_name`: ``--field`` when ``where`` is ``"--"``, the command line).

    >>> parse_section(ServingSection, {"tp": 2}, "inference").tp
    2
    >>> parse_section(ServingSection, {"tpot_target_ms": -5}, "--")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --tpot-target-ms: Input should be greater than 0, got -5
    """
    try:
        return model.model_validate(data or {}, context={"where": where})
    except ValidationError as e:
        raise section_error(e, where, model) from None


def check_positive(value: object, field: str) -> float | None:
    """``value`` as a float if it is a positive, finite number (``None`` passes through).

    Raises :class:`~fabricsim.errors.ConfigError` naming ``field`` otherwise — a price of
    $-3 or NaN per GPU-hour would print money that means nothing.

    Examples
    --------
    >>> check_positive(2.5, "gpu_hour_usd")
    2.5
    >>> check_positive(float("nan"), "--gpu-hour-usd")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --gpu-hour-usd: must be a positive, finite number, got nan
    """
    return _check_number(value, field, zero_ok=False)


def check_non_negative(value: object, field: str) -> float | None:
    """``value`` as a float if it is a finite number >= 0 (``None`` passes through), as
    :func:`check_positive` otherwise.

    >>> check_non_negative(0, "--restart-min")
    0.0
    """
    return _check_number(value, field, zero_ok=True)


def _number(value: object, *, zero_ok: bool) -> object:
    """A section's number checked as :func:`check_positive` checks it, the error a
    ValueError (pydantic names the field); text YAML read from ``1.5e12`` passes on."""
    if isinstance(value, str):
        return value
    try:
        return _check_number(value, "", zero_ok=zero_ok)
    except ConfigError as e:
        raise ValueError(e.message) from None


def _check_number(value: object, field: str, *, zero_ok: bool) -> float | None:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok)):
        what = "a finite number >= 0" if zero_ok else "a positive, finite number"
        raise ConfigError(f"must be {what}, got {value!r}", field=field)
    return float(value)


#: Most jobs one cluster scenario may hold.
MAX_CLUSTER_JOBS = 500


class LoopSection(StrictModel):
    """A job that runs one collective over all its GPUs again and again (an nccl-tests
    burn-in, a benchmark, a synthetic load): the collective, its size, and the idle time
    between two (``gap``; 0: back to back)."""

    collective: str = Field(min_length=1, max_length=64)
    size: str | int = "1GiB"
    gap: str | float = 0.0


class SharedJobSection(StrictModel):
    """One job of a cluster of many (``jobs:``): its name, its GPUs, its training
    section (or a ``collective:`` loop), and optionally the servers it runs on
    (``hosts``, as a scheduler hands them out; otherwise the scenario's ``placement``
    chooses)."""

    name: str = Field(min_length=1, max_length=64)
    gpus: int = Field(ge=1, le=1_000_000)
    training: TrainingSection | None = None
    inference: ServingSection | None = None
    collective: LoopSection | None = None
    hosts: list[int] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_workload(self) -> SharedJobSection:
        given = [self.training, self.inference, self.collective]
        if sum(x is not None for x in given) != 1:
            raise ValueError("give the job a training: section, an inference: section or "
                             "a collective: loop, one of them")
        return self


class CheckpointSection(StrictModel):
    """A job of the cluster writing its checkpoint to storage servers on the same fabric
    (``checkpoints:``, ``fabricsim cluster``): which job, to which servers (kept free of
    jobs), how large (default: the job's model at 14 bytes a parameter) and how often."""

    job: str = Field(min_length=1, max_length=64)
    to: list[int] = Field(min_length=1, max_length=10_000)
    size: str | int | None = None
    every: str | float = "30min"
    rate: str | float | None = None
    """What the storage takes in at most (e.g. ``200GB/s``); default: what the storage
    servers' NICs and the fabric carry."""


class SyntheticTrace(StrictModel):
    """A synthetic trace's offered load (GPU-time asked over the cluster's, in
    expectation) and seed."""

    load: float = Field(1.1, gt=0, le=10, allow_inf_nan=False)
    seed: int = 2026


class TraceSection(StrictModel):
    """A job trace replayed on the cluster (``trace:``, ``fabricsim cluster``): its file
    (relative to the scenario's folder), format, the window replayed, the scheduler, and
    the training job that a trace job spanning servers runs (its traffic; the batch grows
    with its data-parallel size, so ``global_batch`` is not given)."""

    file: str | None = Field(None, min_length=1, max_length=4096)
    synthetic: SyntheticTrace | None = None
    """Instead of a file: a synthetic day shaped like the Helios traces, sized to the
    cluster (:func:`~fabricsim.workloads.jobtrace.synthetic_day`)."""
    format: Literal["philly", "pai", "helios", "csv"] | None = None
    start_hours: float = Field(0.0, ge=0, le=24 * 366 * 10, allow_inf_nan=False)
    hours: float = Field(24.0, gt=0, le=24 * 31, allow_inf_nan=False)
    scheduler: Literal["fifo", "topology"] = "fifo"
    training: TrainingSection | None = None
    skip_larger: bool = False
    """Leave out (and count) jobs larger than the cluster instead of refusing them."""

    @model_validator(mode="after")
    def _one_source(self) -> TraceSection:
        if (self.file is None) == (self.synthetic is None):
            raise ValueError("give the trace's file, or synthetic: {load: 1.1} for a "
                             "synthetic day; one of the two")
        if self.synthetic is not None and self.format is not None:
            raise ValueError("format names a trace file's format; a synthetic day has "
                             "none: drop format")
        return self


class FailureSection(StrictModel):
    """Servers or GPUs that fail under a cluster's jobs (``failure:``, ``fabricsim cluster``):
    what each job on them loses with spares, waiting for the repair, or shrinking to
    the survivors; ``repair_hours`` is how long the servers stay down without a spare."""

    servers: list[int] = Field(default_factory=list, max_length=100_000)
    gpus: list[int] = Field(default_factory=list, max_length=1_000_000)
    """GPUs failing alone (an NVL72 compute tray: 4 consecutive GPUs of a rack)."""
    repair_hours: float = Field(4.0, gt=0, le=24 * 365, allow_inf_nan=False)

    @model_validator(mode="after")
    def _something_fails(self) -> FailureSection:
        if not self.servers and not self.gpus:
            raise ValueError("name the servers (servers: [0]) or GPUs (gpus: [0, 1, 2, "
                             "3]) that fail")
        return self
