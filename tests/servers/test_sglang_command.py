"""Golden SGLang command lines: what `evalctl sweep` launches, flag by flag."""

from __future__ import annotations

import sys

import httpx
import pytest

from evalctl.config import load_config
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.sglang import SGLangAdapter, SGLangSettings

NANO_ON = [
    "-m", "sglang.launch_server",
    "--model-path", "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    "--host", "127.0.0.1",
    "--port", "30000",
    "--nccl-port", "30001",  # evalctl's pick beside --port, not SGLang's own (an OS pick another socket can take)
    "--tp-size", "1",
    "--dtype", "bfloat16",
    "--random-seed", "1234",
    "--enable-cache-report",
    "--enable-metrics",
    "--mamba-radix-cache-strategy", "extra_buffer",
]  # fmt: skip


@pytest.fixture
def nano(monkeypatch):
    monkeypatch.setenv("SGLANG_PATCHED_PYTHON", "/opt/sglang-patched/bin/python")
    return load_config(model="nemotron-nano-9b", overrides={"run_variants": ["baseline", "patched"]})


def test_nemotron_nano_cache_on_and_off(nano):
    profile = nano.servers[0]
    baseline, patched = nano.variants
    on = SGLangAdapter().launch_spec(profile, baseline, CacheMode.on, 30000, "unused", ["0"])
    assert on.argv == [sys.executable, *NANO_ON]
    assert on.env == {"CUDA_VISIBLE_DEVICES": "0"}
    off = SGLangAdapter().launch_spec(profile, patched, CacheMode.off, 30000, "unused", ["0"])
    assert off.argv == ["/opt/sglang-patched/bin/python", *NANO_ON, "--disable-radix-cache"]


def test_nemotron_ultra_nvfp4_tp4():
    cfg = load_config(model="nemotron-3-ultra")
    spec = SGLangAdapter().launch_spec(cfg.servers[0], cfg.variants[0], CacheMode.on, 30000, "unused", ["4", "5", "6", "7"])
    args = spec.argv[1:]
    assert args[args.index("--tp-size") + 1] == "4"
    assert args[args.index("--quantization") + 1] == "modelopt_fp4"
    assert "--disable-radix-cache" not in args
    assert spec.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_tuning_fields_prefix_env_and_extra_args_order():
    profile = ServerProfile(
        name="tuned", model_path="/models/m", extra_args=["--attention-backend", "flashinfer"], env={"A": "profile", "B": "profile"},
        engine=SGLangSettings(tp=2, chunked_prefill_size=8192, mem_fraction_static=0.85, max_running_requests=128, random_seed=7,
                              mamba={"track_interval": 128, "ssm_dtype": "float32"}),
    )  # fmt: skip
    variant = Variant(
        name="container",
        command_prefix=["srun", "--container-image=sglang.sqsh"],
        extra_args=["--log-level", "debug"],
        env={"B": "variant"},
    )
    spec = SGLangAdapter().launch_spec(profile, variant, CacheMode.on, 31000, "unused", ["2", "3"])
    assert spec.argv == [
        "srun", "--container-image=sglang.sqsh", "python3", "-m", "sglang.launch_server",
        "--model-path", "/models/m", "--host", "127.0.0.1", "--port", "31000", "--nccl-port", "31001", "--tp-size", "2",
        "--random-seed", "7", "--chunked-prefill-size", "8192", "--mem-fraction-static", "0.85", "--max-running-requests", "128",
        "--enable-cache-report", "--enable-metrics", "--mamba-track-interval", "128", "--mamba-ssm-dtype", "float32",
        "--attention-backend", "flashinfer", "--log-level", "debug",
    ]  # fmt: skip
    assert spec.env == {"A": "profile", "B": "variant", "CUDA_VISIBLE_DEVICES": "2,3"}


def test_readiness_waits_for_a_generated_token():
    assert SGLangAdapter.health_path == "/health_generate"


def test_prefill_chunk_comes_from_the_profile_else_the_server():
    # SGLang cannot run here: a stand-in /server_info answers what a real one resolved.
    info = {"version": "0.5.23", "chunked_prefill_size": 8192}
    http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=info)), base_url="http://sglang")
    adapter = SGLangAdapter()
    assert adapter.prefill_chunk_tokens(http, None) == 8192
    pinned = ServerProfile(name="g", model_path="m", engine=SGLangSettings(chunked_prefill_size=4096))
    assert adapter.prefill_chunk_tokens(http, pinned) == 4096


def test_deterministic_profile_adds_sglangs_switch():
    profile = ServerProfile(name="p", model_path="/m", engine=SGLangSettings())
    argv = SGLangAdapter().launch_spec(profile.model_copy(update={"deterministic": True}), Variant(), CacheMode.on, 30000, "unused").argv
    assert argv[-1] == "--enable-deterministic-inference"
    assert "--enable-deterministic-inference" not in SGLangAdapter().launch_spec(profile, Variant(), CacheMode.on, 30000, "unused").argv


def test_cached_tokens_absent_before_the_first_hit_scrape_as_zero():
    """SGLang's multiprocess metrics show `sglang:cached_tokens_total` only from its first increment:
    a fresh server's metrics before its first cell hold 0 cached tokens, not nothing."""
    text = (
        "# HELP sglang:prompt_tokens_total Prompt tokens.\n# TYPE sglang:prompt_tokens_total counter\n"
        'sglang:prompt_tokens_total{model_name="m"} 12.0\n'
    )
    http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, text=text)), base_url="http://sglang")
    assert SGLangAdapter().scrape_metrics(http) == {"cached_tokens": 0.0, "prompt_tokens": 12.0}
    hit = text + 'sglang:cached_tokens_total{model_name="m",cache_source="device"} 599.0\n'
    http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, text=hit)), base_url="http://sglang")
    assert SGLangAdapter().scrape_metrics(http)["cached_tokens"] == 599.0


def test_bundled_model_is_served_and_requested_without_a_colon():
    # SGLang reads `name:adapter` in a request's model as a LoRA adapter, and refuses a colon in --served-model-name.
    profile = ServerProfile(name="c", model_path="bundled:smollm2-135m-hf", engine=SGLangSettings(device="cpu"))
    argv = SGLangAdapter().engine_argv("python", profile, CacheMode.on, 1, "unused")
    assert argv[argv.index("--served-model-name") + 1] == "bundled-smollm2-135m-hf"
    assert SGLangAdapter().request_model("bundled:smollm2-135m-hf") == "bundled-smollm2-135m-hf"
    assert SGLangAdapter().request_model("nvidia/NVIDIA-Nemotron-Nano-9B-v2") == "nvidia/NVIDIA-Nemotron-Nano-9B-v2"


def test_a_launched_sglang_gets_a_port_it_accepts():
    # SGLang 0.5.14 derives its gRPC port as --port + 10000 and refuses to start above 65535.
    from evalctl.servers.process import free_port, port_in_use

    assert SGLangAdapter.highest_port == 55535 and SGLangAdapter.ports_needed == 2
    assert all(free_port(highest=40000) <= 40000 for _ in range(5))
    # Below the OS's ephemeral range (32768 on), where client sockets could take it first; both ports free.
    ports = [free_port(span=2) for _ in range(20)]
    assert all(20000 <= p < 32000 and not port_in_use("127.0.0.1", p + 1) for p in ports)


def test_a_fixed_port_whose_next_port_is_taken_is_refused_before_launch(tmp_path):
    """SGLang binds `--port` + 1 too (`--nccl-port`): a profile's fixed port is checked for both."""
    import socket

    from evalctl.errors import ServerError
    from evalctl.servers.process import ManagedServer, free_port

    port = free_port(span=2)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port + 1))
        sock.listen()
        profile = ServerProfile(name="p", model_path="/m", port=port, engine=SGLangSettings())
        server = ManagedServer(profile, Variant(), CacheMode.on, tmp_path / "server.log")
        with pytest.raises(ServerError, match=f"port {port + 1} on 127.0.0.1 is already in use"):
            server.start()
    assert server.process is None  # nothing was launched
