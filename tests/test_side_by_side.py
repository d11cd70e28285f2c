"""Launches side by side (`side_by_side`): how many run at once, and a real sweep's two servers at once, then stopped
by a signal in either phase with nothing left behind."""

from __future__ import annotations

import json
import signal
import time

import pandas as pd
import pytest
from conftest import cpu_profile, only_run, processes_of, write_sweep_config
from test_reliability_cpu import servers_of, start, wait_for

from evalctl.config import config_from_dict
from evalctl.errors import ExitCode
from evalctl.execution import side_by_side
from evalctl.plan import expand


def launches(threads: int | None = 1, **fields):
    engine = {"name": "llamacpp", **({"threads": threads} if threads else {})}
    profile = {"name": "cpu", "model_path": "bundled:smollm2-135m", "engine": engine}
    config = config_from_dict({"model": "m", "servers": [profile], **fields}, None, "test")
    return config, tuple(expand(config))


@pytest.mark.parametrize(
    ("threads", "fields", "cores", "expected"),
    [
        (1, {"side_by_side": 0}, 2, 2),  # cache on and off, a core each
        (1, {"side_by_side": 0}, 8, 2),  # never more than the launches
        (2, {"side_by_side": 0}, 2, 1),  # one launch takes both cores
        (None, {"side_by_side": 0}, 8, 1),  # llama.cpp's default threads: every core, so one at a time
        (1, {}, 8, 1),  # the default: one at a time
        (None, {"side_by_side": 2}, 1, 2),  # what the config says
    ],
)
def test_how_many_launches_run_at_once(monkeypatch, threads, fields, cores, expected):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)))
    config, planned = launches(threads, **fields)
    assert len(planned) == 2 and side_by_side(config, planned, gpus=False) == expected


def test_servers_at_a_url_or_on_gpus_run_one_at_a_time(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    config, planned = launches(1, side_by_side=0)
    assert side_by_side(config, planned, gpus=True) == 1
    url = {"name": "remote", "url": "http://127.0.0.1:9", "model_path": "m.gguf", "engine": {"name": "llamacpp", "threads": 1}}
    for given in (0, 2):  # what the config says too: cache on and off are the one server, and a cell's flush empties it
        config = config_from_dict({"model": "m", "servers": [url], "side_by_side": given}, None, "test")
        assert side_by_side(config, tuple(expand(config)), gpus=False) == 1
    config, planned = launches(1, side_by_side=2)
    assert side_by_side(config, planned, gpus=True) == 1


def test_a_hunt_runs_its_arms_side_by_side_unless_told_otherwise():
    profile = cpu_profile(threads=1)
    assert config_from_dict({"model": "m", "servers": [profile]}, {"workload": "hunt"}, "t").side_by_side == 0
    given = config_from_dict({"model": "m", "servers": [profile], "side_by_side": 1}, {"workload": "hunt"}, "t")
    assert given.side_by_side == 1


@pytest.mark.server
def test_two_servers_side_by_side_answer_every_request_then_a_signal_stops_both(tmp_path, no_orphans):
    """Cache on and off at once (one thread each): every planned request answered once, the two cells' requests
    interleaved in time; then a second sweep, SIGTERM while both servers answer: exit 143, both stopped, rows kept."""
    servers = [cpu_profile(threads=1, parallel=1)]
    cfg = write_sweep_config(tmp_path, None, servers, task="prefix-recall", shots=[4], cache=["on", "off"], limit=6, side_by_side=2)
    cfg.write_text(cfg.read_text() + "concurrency: [1]\n")
    proc = start(tmp_path, "sweep", "--config", str(cfg))
    assert proc.wait(timeout=300) == 0, (tmp_path / "evalctl.out").read_text()
    samples = pd.read_parquet(only_run(tmp_path / "out") / "samples.parquet")
    assert sorted(samples.groupby("cache").size().items()) == [("off", 6), ("on", 6)] and samples.error.isna().all()
    times = {cache: pd.to_datetime(group["started_at"]) for cache, group in samples.groupby("cache")}
    assert times["on"].min() < times["off"].max() and times["off"].min() < times["on"].max()  # at once, not one after the other

    out = tmp_path / "long"
    proc = start(tmp_path, "sweep", "--config", str(cfg), "--limit", "200", "--max-tokens", "64", "--output", str(out))
    wait_for(lambda: len(servers_of(out)) == 2, what="two servers", proc=proc)
    run = only_run(out)
    wait_for(lambda: (run / "records.jsonl").is_file() and (run / "records.jsonl").stat().st_size > 0, what="a record", proc=proc)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert proc.wait(timeout=60) == ExitCode.TERMINATED, (tmp_path / "evalctl.out").read_text()
    assert time.monotonic() - sent < 15
    assert not processes_of(tmp_path)
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    assert len(pd.read_parquet(run / "samples.parquet")) >= 1
