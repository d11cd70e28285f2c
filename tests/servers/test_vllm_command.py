"""Golden vLLM command lines."""

from __future__ import annotations

from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.vllm import VLLMAdapter, VLLMSettings

PROFILE = ServerProfile(name="h100", model_path="nvidia/NVIDIA-Nemotron-Nano-9B-v2", engine=VLLMSettings(
    tp=2, dtype="bfloat16", quantization="fp8", random_seed=1234, chunked_prefill_size=8192, mem_fraction_static=0.9,
    max_running_requests=256, mamba={"ssm_cache_dtype": "float32"},
))  # fmt: skip
VENV = Variant(name="patched", python="/opt/vllm/bin/python")


def test_cache_on_command_and_env():
    spec = VLLMAdapter().launch_spec(PROFILE, VENV, CacheMode.on, 8000, "unused", ["0", "1"])
    assert spec.argv == [
        "/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
        "--host", "127.0.0.1", "--port", "8000", "--tensor-parallel-size", "2",
        "--dtype", "bfloat16", "--quantization", "fp8", "--seed", "1234", "--max-num-batched-tokens", "8192",
        "--gpu-memory-utilization", "0.9", "--max-num-seqs", "256",
        "--enable-prompt-tokens-details", "--enable-prefix-caching", "--mamba-ssm-cache-dtype", "float32",
    ]  # fmt: skip
    # /reset_prefix_cache exists only in dev mode: without it every flush would 404.
    assert spec.env == {"VLLM_SERVER_DEV_MODE": "1", "CUDA_VISIBLE_DEVICES": "0,1"}


def test_cache_off_disables_prefix_caching():
    argv = VLLMAdapter().launch_spec(PROFILE, VENV, CacheMode.off, 8000, "unused", ["0", "1"]).argv
    assert "--no-enable-prefix-caching" in argv and "--enable-prefix-caching" not in argv


def test_deterministic_profile_sets_batch_invariance():
    spec = VLLMAdapter().launch_spec(PROFILE.model_copy(update={"deterministic": True}), VENV, CacheMode.on, 8000, "unused")
    assert spec.env["VLLM_BATCH_INVARIANT"] == "1"
    assert "VLLM_BATCH_INVARIANT" not in VLLMAdapter().launch_spec(PROFILE, VENV, CacheMode.on, 8000, "unused").env
