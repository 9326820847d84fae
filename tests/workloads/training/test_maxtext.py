"""The MaxText config reader (fabricsim.workloads.training.maxtext)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.workloads.training.maxtext import read_maxtext

CFG = Path(__file__).resolve().parents[2] / "data" / "maxtext" / "llama2_70b_gpu.yml"


def test_maxtexts_own_llama2_70b_gpu_config() -> None:
    m = read_maxtext(CFG.read_text())
    assert dict(m.fields) == {"model": "llama2-70b", "zero": "fsdp", "fsdp_impl": "pytorch",
                              "micro_batch": 6, "seq_len": 4096, "recompute": "full"}
    assert "logical_axis_rules" in m.ignored and "steps" in m.ignored


def test_mesh_degrees_quantization_and_remat() -> None:
    f = read_maxtext("model_name: llama3.1-405b\nper_device_batch_size: 1\n"
                     "max_target_length: 8192\nici_tensor_parallelism: 8\n"
                     "dcn_pipeline_parallelism: 4\nici_fsdp_parallelism: 1\n"
                     "dcn_data_parallelism: -1\nremat_policy: save_qkv_proj\n"
                     "quantization: fp8\n").fields
    assert (f["model"], f["tp"], f["pp"], f["zero"], f["micro_batch"], f["recompute"],
            f["precision"]) == ("llama3-405b", 8, 4, 0, 8, "selective", "fp8")


@pytest.mark.parametrize(("text", "match"), [
    ("model_name: llama2-7b\nici_warp_parallelism: 2\n", "unknown key ici_warp_parallelism"),
    ("model_name: gemma-2b\n", "no fabricsim preset"),
    ("per_device_batch_size: 2\n", "no model_name"),
    ("model_name: llama2-7b\nici_fsdp_parallelism: 0\n", "positive integer or -1"),
    ("model_name: llama2-7b\nici_fsdp_parallelism: -1\nici_tensor_parallelism: -1\n",
     "more than one kind of axis"),
    ("model_name: llama2-7b\nper_device_batch_size: 0.5\n", "whole number"),
    ("model_name: llama2-7b\nquantization: int8\n", "BF16 and FP8"),
    ("model_name: llama2-7b\nremat_policy: sometimes\n", "remat_policy"),
    ("- just\n- a list\n", "mapping of keys"),
])
def test_bad_configs_are_refused_naming_the_key(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        read_maxtext(text)
    assert e.value.field == "--from-maxtext"


def test_alias_bombs_and_base_data_parallelism() -> None:
    bomb = ("a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
            "model_name: *b\n")
    with pytest.raises(ConfigError, match="aliases"):
        read_maxtext(bomb)
    # base.yml's dcn_data_parallelism -1: data parallelism fills the cluster
    assert "dp" not in read_maxtext("model_name: llama2-7b\nici_fsdp_parallelism: 8\n").fields
    f = read_maxtext("model_name: llama2-7b\nici_fsdp_parallelism: 8\n"
                     "dcn_data_parallelism: 2\ndcn_pipeline_parallelism: 4\n"
                     "per_device_batch_size: 2\n").fields
    # MaxText's global batch: 2 per device x 64 devices (16 data-parallel x 4 stages)
    assert f["dp"] == 16 and f["pp"] == 4 and f["micro_batch"] == 2
    assert f["global_batch"] == 128
