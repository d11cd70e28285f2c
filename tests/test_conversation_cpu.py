"""A conversation workload against the shared CPU server: turns sent in order on one server, the
cache reused from turn to turn, every request paired with its cold twin (docs/conversations.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import cpu_profile, evalctl, only_run, write_sweep_config

pytestmark = pytest.mark.server

CONVERSATION = {"conversations": 2, "boundaries": [64], "grow_past": 2.0, "events": 2, "chars_per_token": 2.0, "seed": 7}


def conversation_sweep(tmp_path: Path, url: str, conversation: dict, concurrency: int) -> Path:
    """A prefix-recall conversation sweep, cache on and off, against the server at `url`: its run folder."""
    cfg = write_sweep_config(
        tmp_path, None, [cpu_profile()],
        task="prefix-recall", fewshot="sampled", shots=[4], limit=20, cache=["on", "off"], concurrency=concurrency,
        generation={"max_tokens": 4, "stream": False}, conversation=conversation,
    )  # fmt: skip
    out = evalctl("sweep", "--config", str(cfg), "--url", url, "--output", str(tmp_path / "run"), timeout=1200)
    assert out.returncode == 0, out.stderr + out.stdout
    return only_run(tmp_path / "run")


@pytest.mark.rotating(slice=1)
def test_a_conversation_sweep_sends_turns_in_order_and_pairs_each_with_its_cold_twin(tmp_path, no_orphans, cpu_server):
    run = conversation_sweep(tmp_path, cpu_server, CONVERSATION, concurrency=2)
    df = pd.read_parquet(run / "samples.parquet")
    on, off = (df[df.cache == mode].set_index("doc_id") for mode in ("on", "off"))
    assert len(on) == len(off) > 10 and on.error.isna().all() and off.error.isna().all()
    # pairing: the same bytes on both sides, request for request
    assert (on.prompt_hash == off.prompt_hash.reindex(on.index)).all()
    assert {"first", "extend", "rewind", "branch"} <= set(on.turn_kind)
    assert set(on.conversation) == {0, 1}
    for _, conv in on.sort_index().groupby("conversation"):
        # one request after another's answer, in the workload's order
        ends = conv.started_at + conv.latency_s
        assert (conv.started_at.to_numpy()[1:] >= ends.to_numpy()[:-1] - 1e-3).all()
    # the warm side reuses the conversation so far; the cold side never does
    extends = on[on.turn_kind == "extend"]
    assert (extends.cached_tokens > 0).mean() >= 0.8
    assert (off.cached_tokens.fillna(0) == 0).all()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["conversation"]["boundaries"] == [64]
    assert manifest["config"]["concurrency"] == [2]


def test_judged_at_returns_only_returns_are_scored_and_the_warm_side_meets_their_history(tmp_path, cpu_server):
    """judge returns: a record per return on each side; the warm server got each return's history first (most
    of the return's prompt is cached), the cold server the return alone."""
    conversation = {**CONVERSATION, "conversations": 3, "events": 1, "kinds": ["rewind"], "judge": "returns"}
    df = pd.read_parquet(conversation_sweep(tmp_path, cpu_server, conversation, concurrency=1) / "samples.parquet")
    on, off = (df[df.cache == mode].set_index("doc_id").sort_index() for mode in ("on", "off"))
    assert list(on.index) == list(off.index) == [0, 1, 2] and on.error.isna().all() and off.error.isna().all()
    assert set(on.turn_kind) == {"rewind"} and list(on.conversation) == [0, 1, 2]
    assert (on.prompt_hash == off.prompt_hash).all()
    assert (on.cached_tokens >= 0.5 * on.prompt_tokens).all(), on[["prompt_tokens", "cached_tokens"]]
    assert (off.cached_tokens.fillna(0) == 0).all()
