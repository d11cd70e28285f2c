"""Speculative decoding crossed with the cache on real llama.cpp servers: one profile per arm (plain, n-gram
speculation), each launched cache on and cache off, every answer paired with the plain arm's on the same prompt.

Speculation is a launch setting of llama.cpp's server (not per request), so this test launches its own four
servers: long on a shared 2-core machine, hence the rotating tier. Small: prefix-recall, 8 records and questions.
"""

from __future__ import annotations

import json

import pytest
from conftest import cli, cpu_profile, evalctl, only_run, write_sweep_config

pytestmark = [pytest.mark.server, pytest.mark.rotating]
RECORDS = QUESTIONS = 8


def test_ngram_speculation_is_an_arm_paired_with_the_plain_server_at_cache_on_and_off(tmp_path, no_orphans):
    small = {"context_length": 2048, "parallel": 2, "startup_timeout_s": 300}
    profiles = [cpu_profile("plain", **small), cpu_profile("ngram", speculative={"kind": "ngram-simple"}, **small)]
    config = write_sweep_config(
        tmp_path, None, profiles, task="prefix-recall", shots=[RECORDS], cache=["on", "off"], limit=QUESTIONS, generation={"max_tokens": 5}
    )
    out = evalctl("sweep", "--config", str(config), timeout=2400)
    assert out.returncode in (0, 1, 2), out.stderr + out.stdout  # a verdict, not a tool failure
    run = only_run(tmp_path / "out")
    # The feature reached its arm's servers only, and every server set all it was asked (the launcher refuses
    # to start without a speculative type it was asked for).
    servers = json.loads((run / "manifest.json").read_text())["servers"]
    assert len(servers) == 4 and all(not s["unset_settings"] for s in servers)
    assert all(("ngram_simple" in s["argv"]) == (s["profile"] == "ngram") for s in servers), [s["argv"] for s in servers]

    policy = tmp_path / "policy.yaml"
    policy.write_text(f"metric: flexible\nmin_n: {QUESTIONS}\nmax_accuracy_drop: 0.5\nmax_throughput_drop: null\n")
    cli("gate", str(run), "--policy", str(policy))
    checks = json.loads((run / "gate.json").read_text())["checks"]
    paired = {(c["cache"], c["comparison"]): c for c in checks if c["kind"] == "accuracy" and c["profile"] == "ngram"}
    assert set(paired) == {("on", "profile ngram vs plain"), ("off", "profile ngram vs plain"), ("on", "cache on vs off")}
    for check in paired.values():
        print(f"{check['comparison']} cache={check['cache']}: {check['status']}; {check['reason']}")
        assert check["n"] == QUESTIONS and check["status"] != "regression", check["reason"]
