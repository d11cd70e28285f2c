"""Request faults against a real misbehaving HTTP server (tests/fault_server.py): retried, counted, never fatal."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from fault_server import BAD_REQUEST_MESSAGE, MODES, RETRIED

from evalctl.client import Completion, CompletionClient, RequestSettings
from evalctl.records import is_final
from evalctl.schema import CacheMode
from evalctl.servers.registry import adapter_for

HERE = Path(__file__).resolve().parent
# What each fault becomes after retries: the error kind of its row (None: answered).
EXPECTED_KINDS = {
    "ok": None,
    "http_500": "http_5xx",
    "500_then_ok": None,
    "garbage_json": "bad_response",
    "missing_choices": "bad_response",
    "drop": "connection",
    "slow": "timeout",
    "http_400": "http_4xx",
}


@pytest.fixture
def fault_url():
    proc = subprocess.Popen([sys.executable, str(HERE / "fault_server.py")], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.kill()
        proc.wait()


def expected_counts() -> Counter:
    return Counter(EXPECTED_KINDS[mode] for mode in MODES)


def test_client_turns_every_fault_into_a_counted_row(fault_url):
    async def run() -> list:
        settings = RequestSettings(model="m", timeout_s=1.0, max_retries=1)
        async with CompletionClient(fault_url, settings, concurrency=4, backoff_s=0.05) as client:
            return [c async for _, c in client.map_chains([(i, f"prompt {i}", {"max_tokens": 4})] for i in range(len(MODES)))]

    completions = asyncio.run(run())
    assert Counter(c.error_kind for c in completions) == expected_counts()
    by_kind = {c.error_kind: c for c in completions}
    assert BAD_REQUEST_MESSAGE in by_kind["http_4xx"].error and by_kind["http_4xx"].attempts == 1  # 4xx: no retry
    assert by_kind["http_5xx"].attempts == 2 and by_kind["timeout"].attempts == 2  # retried max_retries times
    assert "not JSON" in by_kind["bad_response"].error or "choices" in by_kind["bad_response"].error
    assert sorted(c.attempts for c in completions if c.error is None) == [1, 2]  # the 500-then-ok one was retried
    # every attempt without an answer is kept: all of a failed request's, all but the last of an answered one's
    assert all(len(c.failed_attempts) == c.attempts - (c.error is None) for c in completions)
    assert all(c.first_error_kind is None for c in completions if c.attempts == 1 and c.error is None)


def test_every_attempt_that_got_no_answer_is_kept_with_its_kind_message_and_time(fault_url):
    """Retries are evidence: an answer after two failures says what each failure was, not only how many there were."""

    async def run() -> Completion:
        async with CompletionClient(fault_url, RequestSettings(model="m", timeout_s=5.0, max_retries=2), backoff_s=0.01) as client:
            return await client.complete(RETRIED, max_tokens=4)

    done = asyncio.run(run())
    assert done.error is None and done.attempts == 3 and done.text.endswith("#### 4")
    assert [a.error_kind for a in done.failed_attempts] == ["http_5xx", "connection"] and done.first_error_kind == "http_5xx"
    assert done.failed_attempts[0].error == "HTTP 500: internal error (fake)"
    assert all(0 < a.latency_s < done.latency_s for a in done.failed_attempts)


@pytest.mark.parametrize("status", [400, 404, 408, 429, 500, 501, 503, 505])
def test_client_retries_exactly_what_a_resumed_run_sends_again(fault_url, status):
    async def run() -> Completion:
        async with CompletionClient(fault_url, RequestSettings(model="m", timeout_s=5.0, max_retries=1), backoff_s=0.01) as client:
            return await client.complete(f"status {status}", max_tokens=4)

    completion = asyncio.run(run())
    retried_now = completion.attempts == 2
    sent_again_on_resume = not is_final(pd.DataFrame({"error_kind": [completion.error_kind]})).iloc[0]
    assert retried_now == sent_again_on_resume == (status >= 500 or status in (408, 429)), completion


@pytest.mark.parametrize("cache", list(CacheMode))
def test_a_cold_vllm_request_salts_the_cache_anew_on_each_attempt_and_a_warm_one_not_at_all(fault_url, cache):
    """A retry must not find the blocks its failed attempt cached: a new `cache_salt` each attempt."""
    adapter = adapter_for("vllm")

    async def run() -> Completion:
        settings = RequestSettings(model="m", timeout_s=5.0, max_retries=1, fresh_fields=lambda: adapter.fresh_fields(cache))
        async with CompletionClient(fault_url, settings, backoff_s=0.01) as client:
            return await client.complete(f"salts {cache.value}")

    done = asyncio.run(run())
    salts = done.text.split()
    assert done.attempts == 2 and len(salts) == 2
    if cache is CacheMode.off:
        assert salts[0] != salts[1] and all(len(s) >= 32 for s in salts)
    else:
        assert salts == ["None", "None"]


def test_malformed_responses_name_what_is_wrong(fault_url):
    async def run() -> list:
        async with CompletionClient(fault_url, RequestSettings(model="m", timeout_s=1.0, max_retries=0)) as client:
            return [c async for _, c in client.map_chains([(i, f"p{i}", {})] for i in range(MODES.index("missing_choices") + 1))]

    errors = sorted(c.error for c in asyncio.run(run()) if c.error_kind == "bad_response")
    assert errors[0].startswith("malformed response: body is not JSON")
    assert errors[1].startswith("malformed response: no choices[0] object")


def test_stop_event_sends_no_new_requests(fault_url):
    async def run() -> list:
        stop = asyncio.Event()
        stop.set()
        async with CompletionClient(fault_url, RequestSettings(model="m", timeout_s=1.0, max_retries=0), concurrency=2) as client:
            return [c async for _, c in client.map_chains(([(i, f"q{i}", {})] for i in range(5)), stop)]

    assert asyncio.run(run()) == []


def test_sweep_against_misbehaving_server_completes_with_error_counts(tmp_path, fault_url, data_dir, no_orphans):
    from conftest import evalctl, only_run

    cfg = tmp_path / "faults.yaml"
    cfg.write_text(
        f"""
model: faults
shots: [1, 2]
cache: ["off"]
limit: 4
request_timeout_s: 1.0
max_retries: 1
data_dir: {data_dir}
output_dir: {tmp_path / "out"}
generation: {{max_tokens: 8}}
servers:
  - {{name: fault, url: "{fault_url}", model_path: fault-model}}
"""
    )
    out = evalctl("sweep", "--config", str(cfg))
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path / "out")
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == len(MODES)
    assert Counter(None if pd.isna(k) else k for k in df.error_kind) == expected_counts()
    assert df[df.error.notna()].strict_correct.isna().all()  # errors are not wrong answers
    assert df[df.error_kind == "http_4xx"].error.str.contains(BAD_REQUEST_MESSAGE, regex=False).all()
    # the failed attempts survive the records and their compaction: the 500-then-ok answer says its first attempt failed
    retried = df[df.error.isna() & (df.attempts == 2)].iloc[0]
    assert retried.first_error_kind == "http_5xx" and [a["error_kind"] for a in retried.failed_attempts] == ["http_5xx"]
    assert df[(df.attempts == 1) & df.error.isna()].first_error_kind.isna().all()
    failed = df[df.error_kind == "http_5xx"].iloc[0]  # HTTP 500 on both attempts
    assert [(a["error_kind"], a["error"]) for a in failed.failed_attempts] == [("http_5xx", "HTTP 500: internal error (fake)")] * 2
    summary = pd.read_csv(run / "summary.csv")
    assert summary.errors.sum() == sum(n for kind, n in expected_counts().items() if kind) and summary.n.sum() == 2
