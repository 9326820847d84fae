"""The torchtitan job-config reader (fabricsim.workloads.training.torchtitan)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.workloads.training.torchtitan import read_torchtitan

CFG = Path(__file__).resolve().parents[2] / "data" / "torchtitan" / "llama3_8b.toml"


def test_torchtitans_own_llama3_8b_preset() -> None:
    """torchtitan's shipped config (2024 layout: batch_size under [training]): FSDP2 over
    every rank, selective activation checkpointing, BF16; paths and logging ignored."""
    t = read_torchtitan(CFG.read_text())
    f = dict(t.fields)
    assert f == {"model": "llama3-8b", "tp": 1, "pp": 1, "cp": 1, "zero": "fsdp",
                 "fsdp_impl": "pytorch", "micro_batch": 1, "seq_len": 8192,
                 "recompute": "selective", "grad_reduce_dtype": "fp32"}
    assert "training.steps" in t.ignored and "optimizer" in t.ignored
    assert any("shard degree -1" in a for a in t.applied)


def test_current_layout_float8_hsdp_and_pipelining() -> None:
    t = read_torchtitan('''
[model]
name = "llama3"
flavor = "70B"
converters = ["float8"]
[training]
local_batch_size = 4
seq_len = 8192
mixed_precision_reduce = "bfloat16"
[parallelism]
data_parallel_replicate_degree = 2
data_parallel_shard_degree = 4
tensor_parallel_degree = 8
pipeline_parallel_degree = 4
pipeline_parallel_microbatch_size = 2
[activation_checkpoint]
mode = "full"
''')
    f = t.fields
    assert (f["precision"], f["fp8_recipe"], f["dp"], f["global_batch"], f["micro_batch"]) \
        == ("fp8", "torchao", 8, 32, 2)
    assert f["grad_reduce_dtype"] == "bf16" and f["recompute"] == "full"
    assert any("HSDP" in a for a in t.applied)


@pytest.mark.parametrize(("text", "match"), [
    ("[model]\nname = 'llama3'\nflavor = '8B'\n[training]\nfoo_degree = 2\n",
     "unknown key training.foo_degree"),
    ("[model]\nname = 'llama3'\nflavor = '8B'\n[parallelism]\nwhatever = 1\n",
     "unknown key parallelism.whatever"),
    ("[model]\nname = 'mystery'\nflavor = '1B'\n", "no fabricsim preset"),
    ("[training]\nseq_len = 4096\n", "no \\[model\\] name"),
    ("[model\nname = 'llama3'", "not a TOML file"),
    ("[model]\nname = 'llama3'\nflavor = '8B'\n[parallelism]\ntensor_parallel_degree = 'x'\n",
     "must be an integer"),
    ("[model]\nname = 'llama3'\nflavor = '8B'\n[activation_checkpoint]\nmode = 'some'\n",
     "none, selective or full"),
])
def test_unknown_versions_and_bad_values_are_refused(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        read_torchtitan(text)
    assert e.value.field == "--from-torchtitan"


def test_newer_converter_names_are_fp8() -> None:
    t = read_torchtitan('[model]\nname = "llama3"\nflavor = "8B"\n'
                        'converters = ["quantize.linear.float8"]\n')
    assert t.fields["precision"] == "fp8" and t.fields["fp8_recipe"] == "torchao"
