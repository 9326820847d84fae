"""Every published run the training/serving accuracy issue names runs from the command
line as it was run (its layout, precision, engine choices), each in one test. What the
figures should be is checked by the accuracy benchmarks; here only that the run can be
said, and says what it assumed."""

from __future__ import annotations

import json

import pytest

from fabricsim.cli.app import main


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


TRAINING = {
    # MegaScale's 175B on 12,288 A100 over 200G RoCE: TP8 PP8 DP192
    "megascale-175b": ["--model", "gpt3-175b", "--system", "dgx-a100", "--nodes", "1536",
                       "--fabric", "roce-200g", "--tp", "8", "--pp", "8",
                       "--global-batch", "6144", "--seq-len", "2048"],
    # MLPerf GPT-3 175B on 10,752 H100: TP4 PP8 DP336, FP8
    "mlperf-gpt3-10752": ["--model", "gpt3-175b", "--system", "dgx-h100", "--nodes", "1344",
                          "--tp", "4", "--pp", "8", "--global-batch", "2688",
                          "--seq-len", "2048", "--precision", "fp8"],
    # Llama 3 405B on 16,384 H100 over RoCE 400G: TP8 PP16, a layer less on the first
    # and last stages (Meta's layout)
    "llama3-405b-16k": ["--model", "llama3-405b", "--system", "dgx-h100", "--nodes", "2048",
                        "--fabric", "roce-400g", "--tp", "8", "--pp", "16",
                        "--global-batch", "2048", "--seq-len", "8192",
                        "--account-for-embedding-loss"],
    # NeMo-style Hopper BF16 dense: Llama 3.1 70B on 64 H100, TP4 PP4 VP5
    "llama3-70b-bf16": ["--model", "llama3-70b", "--system", "dgx-h100", "--nodes", "8",
                        "--tp", "4", "--pp", "4", "--vp", "5", "--global-batch", "128",
                        "--recompute", "full", "--recompute-layers", "2"],
    # Qwen3-235B-A22B on 64 GB200: TP2 EP64, token drop (capacity 1.0)
    "qwen3-235b-gb200": ["--model", "qwen3-235b-a22b", "--system", "gb200-nvl72",
                         "--gpus-per-node", "64", "--tp", "2", "--ep", "64", "--etp", "1",
                         "--global-batch", "1024", "--precision", "fp8",
                         "--moe-capacity-factor", "1.0", "--recompute", "full"],
    # DeepSeek-V3 BF16 on 128 GB200 (two racks) in NeMo's layout, EP16 with DeepEP
    "deepseek-v3-gb200": ["--model", "deepseek-v3", "--system", "gb200-nvl72", "--nodes", "2",
                          "--gpus-per-node", "64", "--tp", "1", "--pp", "8",
                          "--pipeline-layout", "Et|(tt|)*30mL", "--ep", "16",
                          "--global-batch", "2048", "--ep-kernel", "deepep",
                          "--recompute", "full"],
    # hybrid sharding: FSDP inside 8-GPU groups, replicas across
    "hsdp": ["--model", "llama3-8b", "--system", "dgx-h100", "--nodes", "8", "--tp", "1",
             "--zero", "fsdp", "--fsdp-shard-size", "8", "--global-batch", "256"],
    # models people run now
    "grok-1": ["--model", "grok-1", "--system", "dgx-h100", "--nodes", "16", "--tp", "8",
               "--pp", "4", "--ep", "4", "--global-batch", "512", "--recompute", "full"],
    "llama4-maverick": ["--model", "llama4-maverick", "--system", "dgx-h100", "--nodes", "32",
                        "--tp", "4", "--pp", "4", "--ep", "16", "--etp", "1",
                        "--global-batch", "512", "--zero", "fsdp", "--recompute", "full"],
    # hybrid Mamba models: Nemotron-H 56B as NVIDIA trained it (TP8, FP8), Nemotron 3 Nano
    # in NeMo's H100 layout (EP8), Qwen3-Next's gated delta-net blocks
    "nemotron-h-56b": ["--model", "nemotron-h-56b", "--system", "dgx-h100", "--nodes", "16",
                       "--tp", "8", "--global-batch", "768", "--seq-len", "8192",
                       "--precision", "fp8", "--zero", "1"],
    "nemotron-3-nano": ["--model", "nemotron-3-nano", "--system", "dgx-h100", "--nodes",
                        "2", "--tp", "1", "--ep", "8", "--global-batch", "1024",
                        "--seq-len", "8192", "--precision", "fp8", "--zero", "1"],
    # Nemotron 3 Super's latent MoE on one GB200 rack in NVFP4 (NeMo's 64-GPU layout)
    "nemotron-3-super": ["--model", "nemotron-3-super", "--system", "gb200-nvl72",
                         "--gpus-per-node", "64", "--tp", "1", "--ep", "64",
                         "--global-batch", "512", "--seq-len", "8192", "--precision", "fp4",
                         "--zero", "1"],
    "qwen3-next": ["--model", "qwen3-next-80b-a3b", "--system", "dgx-h100", "--nodes", "8",
                   "--tp", "2", "--ep", "32", "--global-batch", "512", "--precision", "fp8",
                   "--zero", "1"],
}


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_training_run(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "train", *TRAINING[name])
    assert float(d["step_time_s"]) > 0  # type: ignore[arg-type]
    par = d["parallel"]
    assert isinstance(par, dict)
    if int(par["ep"]) > 1:
        assert par["ep_kernel"]


SERVING = {
    # Llama 2 70B TP4, batch 1, 128-token prompt, FP8 on H100
    "llama2-70b-tp4-b1": ["--model", "llama2-70b", "--tp", "4", "--batch", "1",
                          "--prompt-len", "128", "--output-len", "128",
                          "--precision", "fp8"],
    # Llama 3.3 70B FP8 TP2 on H100 at concurrency 1
    "llama3-70b-tp2-c1": ["--model", "llama3-70b", "--tp", "2", "--batch", "1",
                          "--precision", "fp8"],
    # SGLang's DeepSeek on 12 x 8 H100: prefill EP32 (DP attention), decode EP72 (EPLB)
    "sglang-prefill-ep32": ["--model", "deepseek-v3", "--system", "dgx-h100", "--nodes", "4",
                            "--tp", "32", "--ep", "32", "--attention-dp", "32",
                            "--batch", "256", "--prompt-len", "2000", "--output-len", "1",
                            "--precision", "fp8"],
    "sglang-decode-ep72": ["--model", "deepseek-v3", "--system", "dgx-h100", "--nodes", "9",
                           "--tp", "72", "--ep", "72", "--attention-dp", "72",
                           "--redundant-experts", "32", "--batch", "4608",
                           "--prompt-len", "2000", "--output-len", "100",
                           "--precision", "fp8"],
    # GB200 NVL72 wide EP with TensorRT-LLM's one-sided NVLink all-to-all, NVFP4
    "gb200-wide-ep": ["--model", "deepseek-v3", "--system", "gb200-nvl72", "--tp", "72",
                      "--ep", "72", "--attention-dp", "72", "--redundant-experts", "32",
                      "--batch", "2304", "--ep-kernel", "nvlink-onesided",
                      "--precision", "nvfp4"],
    # the engine SGLang's published runs use (its overlap scheduler)
    "sglang-engine": ["--model", "llama3-70b", "--tp", "2", "--batch", "1", "--precision",
                      "fp8", "--engine", "sglang"],
    # a hybrid model's recurrent state instead of a KV cache in most of its blocks
    "nemotron-h-8b": ["--model", "nemotron-h-8b", "--tp", "1", "--batch", "64",
                      "--prompt-len", "7000", "--output-len", "1000", "--precision", "fp8"],
    # Kimi K2 on 16 x 8 H200 (EP128, 384 experts)
    "kimi-k2-h200": ["--model", "kimi-k2", "--system", "dgx-h200", "--nodes", "16",
                     "--tp", "128", "--ep", "128", "--attention-dp", "128",
                     "--batch", "4096", "--precision", "fp8"],
}


@pytest.mark.parametrize("name", sorted(SERVING))
def test_serving_run(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "infer", *SERVING[name])
    assert float(d["tpot_s"]) > 0 and float(d["ttft_s"]) > 0  # type: ignore[arg-type]
    if int(d["attention_dp"]) > 1:  # type: ignore[arg-type]
        assert d["ep_kernel"] != "none" and float(d["ep_s_per_token"]) > 0  # type: ignore[arg-type]
