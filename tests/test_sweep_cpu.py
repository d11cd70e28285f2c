"""End to end against the real llama.cpp CPU server (SmolLM2-135M)."""

from __future__ import annotations

import json
import re
import shutil
import socket

import pandas as pd
import pytest
from conftest import cli, cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.datasets import packaged_data_dir
from evalctl.errors import ExitCode
from evalctl.resume import data_fingerprint

pytestmark = pytest.mark.server


def test_sweep_cache_on_off_end_to_end(launched_run, tmp_path):
    run = launched_run.run
    for name in ("manifest.json", "samples.parquet", "summary.csv", "accuracy_vs_shots.png", "accuracy_vs_prefill_length.png",
                 "server-cpu-default-cache-on.log", "server-cpu-default-cache-off.log"):  # fmt: skip
        assert (run / name).is_file(), name
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == 12
    assert df.error.isna().all()
    assert (df.prompt_tokens > 0).all()
    assert (df[df.cache == "off"].cached_tokens == 0).all()
    on = df[df.cache == "on"].sort_values("started_at")
    assert (on.cached_tokens.iloc[1:] > 0).all()
    assert on.prewarmed.all()
    # same questions, same prompts in both cache modes: the runs are paired
    key = ["shots", "doc_id", "prompt_hash"]
    assert sorted(map(tuple, df[df.cache == "on"][key].values)) == sorted(map(tuple, df[df.cache == "off"][key].values))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [s["cache"] for s in manifest["servers"]] == ["on", "off"]
    assert all(any(a.endswith("llamacpp_main.py") for a in s["argv"]) for s in manifest["servers"])
    assert manifest["servers"][0]["info"]["version"]
    summary = pd.read_csv(run / "summary.csv")
    assert len(summary) == 4 and {"strict_acc", "strict_lo", "requests_per_s", "cache_hit_ratio"} <= set(summary.columns)
    assert "Accuracy by cell" in launched_run.stdout

    copy = tmp_path / run.name  # analyze writes summary.csv: into a copy of the shared run
    shutil.copytree(run, copy)
    again = cli("analyze", str(copy))
    assert again.returncode == 0, again.stderr
    assert pd.read_csv(copy / "summary.csv").equals(summary)


def test_prompt_longer_than_context_is_an_error_row(tmp_path, data_dir, no_orphans):
    cfg = write_sweep_config(
        tmp_path, data_dir, [cpu_profile(context_length=512, parallel=1)], shots=[8], cache=["off"], limit=2, generation={"max_tokens": 8}
    )
    out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    df = pd.read_parquet(only_run(tmp_path / "out") / "samples.parquet")
    assert len(df) == 2
    assert (df.error_kind == "http_4xx").all()
    assert df.error.str.contains("context").all()
    assert df.strict_correct.isna().all()  # an error is not a wrong answer


def test_server_that_never_becomes_healthy_reports_log_tail(tmp_path, data_dir, no_orphans):
    cfg = write_sweep_config(tmp_path, data_dir, [cpu_profile(model_path=str(tmp_path / "missing.gguf"), startup_timeout_s=60)])
    out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == ExitCode.RUN_FAILED, out.stdout + out.stderr
    assert "exited with code" in out.stderr
    manifest = json.loads((only_run(tmp_path / "out") / "manifest.json").read_text())
    failed = manifest["servers"][0]
    assert failed["status"] == "failed" and failed["log_tail"]


def test_port_in_use_is_a_clear_error(tmp_path, data_dir, no_orphans):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        cfg = write_sweep_config(tmp_path, data_dir, [cpu_profile(port=port)])
        out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == ExitCode.RUN_FAILED
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nope"], "unknown model alias 'nope'; known:"),
        (["--model", "smollm2-135m", "--task", "gsm8k", "--shots", "-1"], "shot counts must be >= 0"),
        (["--model", "smollm2-135m", "--task", "gsm8k", "--shots", "a,b"], "Invalid value for '--shots': not comma-separated integers"),
        (["--model", "smollm2-135m", "--task", "gsm8k", "--cache", "sometimes"], "Input should be 'on' or 'off' (given as an option)"),
        (["--model", "smollm2-135m", "--task", "gsm8k", "--limit", "0"], "limit must be >= 1"),
        (["--model", "smollm2-135m", "--canary", "nope"], "canary: unknown fault 'nope'; known: lost-prefix,"),
    ],
)
def test_bad_cli_input_is_bad_input_with_message(tmp_path, args, message, no_orphans):
    out = cli("sweep", *args, "--output", str(tmp_path))
    assert out.returncode == ExitCode.BAD_INPUT
    assert message in " ".join(out.stderr.split())
    assert not any(tmp_path.iterdir())  # nothing written for rejected input


def test_help_explains_every_option():
    out = cli("sweep", "--help")
    assert out.returncode == 0
    for option in ("--model", "--config", "--shots", "--cache", "--limit", "--concurrency", "--output", "--fewshot", "--url", "--data-dir"):
        assert option in out.stdout


def test_gsm8k_is_one_flag_away_from_the_default_and_reads_the_packaged_data(launched_run):
    # The alias as shipped (launching its own servers; an HF_TOKEN added to its server's env), --task gsm8k:
    # the task's own settings, packaged data, the CPU gate policy.
    text = " ".join(launched_run.stdout.split())
    verdict = re.search(r"gate \(cpu-smoke policy, tolerated flexible accuracy drop 0\.15[^)]*\): (\w+)", text)
    assert verdict and verdict.group(1) in ("pass", "inconclusive"), text  # a healthy server is no regression
    assert re.search(r"verdict rests on: \w+ from \d+ of \d+ ", text)
    manifest = json.loads((launched_run.run / "manifest.json").read_text())
    assert manifest["config"]["task"] == "gsm8k" and manifest["config"]["generation"]["max_tokens"] == 128  # gsm8k's task_settings
    assert manifest["data_fingerprint"] == data_fingerprint(packaged_data_dir("gsm8k"))
