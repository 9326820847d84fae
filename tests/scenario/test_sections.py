"""The job sections of a scenario: typed, flat as written, one vocabulary with the flags."""

from __future__ import annotations

import pytest

from fabricsim.errors import ConfigError, DeprecatedName
from fabricsim.scenario.sections import (
    PacketSection,
    ServingSection,
    TrainingSection,
    parse_section,
)
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.parallel import ParallelConfig


def _training(data: dict[str, object]) -> tuple[TransformerSpec, ParallelConfig]:
    s = parse_section(TrainingSection, data, "training")
    return s.build_model("llama3-8b", "training"), s.parallel()


def test_training_section_validation() -> None:
    m, cfg = _training({"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 1000,
                        "tp": 2})
    assert m.layers == 4 and cfg.tp == 2
    with pytest.raises(ConfigError, match=r"training\.hidden"):
        _training({"layers": 4})
    with pytest.raises(ConfigError, match=r"training\.kv_heads"):
        _training({"model": "llama2-7b", "kv_heads": 5})
    with pytest.raises(ConfigError, match=r"training\.bogus"):
        _training({"model": "llama2-7b", "bogus": 1})
    with pytest.raises(ConfigError, match=r"training\.model.*did you mean"):
        _training({"model": "llama2-7"})


@pytest.mark.parametrize(("key", "meant"), [("virtual_pipeline_model_parallel_size", "vp"),
                                            ("fp8", "precision: fp8"),
                                            ("globl_batch", "global_batch"),
                                            ("grad_reduce", "grad_reduce_dtype")])
def test_a_misnamed_training_key_names_the_field_meant(key: str, meant: str) -> None:
    with pytest.raises(ConfigError, match=f"did you mean {meant}") as e:
        parse_section(TrainingSection, {"model": "llama3-8b", key: 2}, "training")
    assert e.value.field == f"training.{key}"


def test_a_misnamed_inference_key_names_the_field_meant() -> None:
    with pytest.raises(ConfigError, match="did you mean max_batch"):
        parse_section(ServingSection, {"model": "llama3-8b", "max_num_seqs": 30}, "inference")


def test_tpot_target_is_read_as_tpot_target_ms_with_a_warning() -> None:
    with pytest.warns(DeprecatedName, match="inference.tpot_target is the old name of "
                      "inference.tpot_target_ms"):
        s = parse_section(ServingSection, {"tpot_target": 30}, "inference")
    assert s.tpot_target_ms == 30


def test_flag_errors_name_the_flag() -> None:
    """A section made of flags (where \"--\") names its fields as flags."""
    with pytest.raises(ConfigError) as e:
        parse_section(TrainingSection, {"seq_len": 0}, "--")
    assert e.value.field == "--seq-len"


def test_a_later_layer_wins_and_its_megatron_list_beats_the_earlier_layer() -> None:
    """One merge rule: inside a layer its own keys win over its pasted list; a later layer
    (the command line) wins over an earlier one (the file), its list included."""
    file = TrainingSection.model_validate({"model": "llama3-70b", "pp": 2, "from_megatron":
                                           "--pipeline-model-parallel-size 4 "
                                           "--tensor-model-parallel-size 8"})
    assert (file.tp, file.pp) == (8, 2)  # the section's pp over its list's
    flags = parse_section(TrainingSection, {"from_megatron":
                                            "--pipeline-model-parallel-size 16", "tp": 4},
                          "--")
    both = file.over(flags)
    assert (both.tp, both.pp) == (4, 16)  # the flags' list over the file's keys
    assert both.from_megatron == "--pipeline-model-parallel-size 16"


def test_given_fields_round_trip() -> None:
    s = TrainingSection.model_validate({"model": "llama3-8b", "vp": 2, "layers": 8,
                                        "checkpoint_gbps": "5e2"})
    assert s.given() == {"model": "llama3-8b", "vp": 2, "layers": 8, "checkpoint_gbps": 500.0}
    assert TrainingSection.model_validate(s.given()) == s


def test_packet_variants_are_read_once_with_their_fields() -> None:
    s = PacketSection.model_validate({"mtu": 1024, "variants": {"big": {"mtu": 4096}}})
    assert (s.base.mtu, s.config("big").mtu) == (1024, 4096)
    with pytest.raises(ConfigError) as e:
        PacketSection.model_validate({"variants": {"bad": {"mtu": 10}}})
    assert e.value.field == "packet.variants.bad.mtu"
    with pytest.raises(ConfigError, match="did you mean"):
        s.config("bgi")
