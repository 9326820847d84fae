"""The NeMo 2 / Megatron-Bridge override reader (fabricsim.workloads.training.nemo)."""

from __future__ import annotations

import pytest

from fabricsim.errors import ConfigError
from fabricsim.workloads.training.nemo import read_nemo


def test_nemos_documented_cli_line() -> None:
    """NeMo 2's parallelism guide sets TP from the command line:
    ``nemo llm pretrain --factory llama3_8b trainer.strategy.tensor_model_parallel_size=2``."""
    n = read_nemo("nemo llm pretrain --factory llama3_8b "
                  "trainer.strategy.tensor_model_parallel_size=2")
    assert dict(n.fields) == {"model": "llama3-8b", "tp": 2}
    assert dict(n.launcher) == {} and "defaults" in n.applied[0]


def test_a_nemo_run_script_line_and_a_megatron_bridge_line() -> None:
    n = read_nemo("python run.py --yes --factory llama31_405b trainer.num_nodes=64 "
                  "trainer.devices=8 trainer.strategy.pipeline_model_parallel_size=8 "
                  "trainer.strategy.virtual_pipeline_model_parallel_size=None "
                  "trainer.plugins=bf16_with_fp8_current_scaling_mixed "
                  "data.micro_batch_size=1 data.global_batch_size=252 log.ckpt=None")
    assert n.fields["model"] == "llama3-405b" and n.fields["pp"] == 8
    assert n.fields["vp"] == 1 and n.fields["precision"] == "fp8"
    assert n.fields["fp8_recipe"] == "tensorwise"
    assert dict(n.launcher) == {"nodes": 64, "gpus_per_node": 8} and "log.ckpt" in n.ignored
    b = read_nemo("--recipe llama3_70b_pretrain_config model.tensor_model_parallel_size=4 "
                  "model.context_parallel_size=2 train.global_batch_size=128 "
                  "model.seq_length=8192 mixed_precision=bf16_mixed")
    assert (b.fields["model"], b.fields["tp"], b.fields["cp"], b.fields["global_batch"],
            b.fields["seq_len"], b.fields["precision"]) == ("llama3-70b", 4, 2, 128, 8192,
                                                            "bf16")


@pytest.mark.parametrize(("text", "match"), [
    ("--factory llama3_8b trainer.strategy.tensor_parallel_degree=2", "unknown key"),
    ("--factory llama3_8b data.mystery=1", "unknown key data.mystery"),
    ("--factory mamba2_8b", "no fabricsim preset"),
    ("trainer.num_nodes=2", "no recipe"),
    ("--factory llama3_8b trainer.strategy.tensor_model_parallel_size=two", "integer"),
    ("--factory llama3_8b trainer.plugins=fp64_mixed", "precision recipes"),
    ("--factory llama3_8b data.seq_length=4096 model.config.seq_length=8192",
     "contradict each other"),
])
def test_unknown_versions_and_contradictions_are_refused(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        read_nemo(text)
    assert e.value.field == "--from-nemo"
