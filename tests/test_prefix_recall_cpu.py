"""prefix-recall against the real CPU server: a lost cached prefix shows as lost accuracy.

`evalctl canary --fault lost-prefix` sits in front of a real llama.cpp server; a healthy
sweep goes to the server directly, a second one through the canary, and `evalctl gate`
judges the second against the first. Small on purpose: one cell, cache on, 15 questions
over a ~250-token prefix computed once per run on a one-slot server, and a policy whose
`min_n` lets 15 pairs decide (a right->wrong flip in 5 of them is already p < 0.05).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import canary_in_front, cli, cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.errors import ExitCode

pytestmark = pytest.mark.server

RECORDS = 24
QUESTIONS = 15


def test_lost_prefix_canary_drops_recall_and_the_gate_names_the_cell(tmp_path, no_orphans, cpu_server):
    server_url = cpu_server
    with canary_in_front(server_url) as canary_url:
        cfg = write_sweep_config(
            tmp_path, None, [cpu_profile()], task="prefix-recall", shots=[RECORDS], limit=QUESTIONS, generation={"max_tokens": 5}
        )
        runs = {}
        for name, url in (("healthy", server_url), ("faulty", canary_url)):
            out = evalctl("sweep", "--config", str(cfg), "--url", url, "--output", str(tmp_path / name), timeout=1200)
            assert out.returncode == 0, out.stderr + out.stdout
            runs[name] = only_run(tmp_path / name)

    acc = {name: pd.read_parquet(run / "samples.parquet") for name, run in runs.items()}
    for df in acc.values():
        assert len(df) == QUESTIONS and df.error.isna().all()
        assert set(df.answer_position) == {"start", "middle", "end"}
        assert df.answer_token_offset.between(1, df.prompt_tokens.min()).all()
    healthy, faulty = (acc[n].strict_correct.mean() for n in ("healthy", "faulty"))
    print(f"prefix-recall {RECORDS} records, cache on: healthy {healthy:.2f}, lost-prefix {faulty:.2f}")
    assert healthy >= 0.25
    assert faulty <= 0.05
    assert (acc["faulty"].cached_tokens > 0).all()  # the canary claims cache hits: nothing looks wrong but accuracy

    policy = tmp_path / "policy.yaml"
    policy.write_text(f"min_n: {QUESTIONS}\n")
    gate = cli("gate", str(runs["faulty"]), "--baseline", str(runs["healthy"]), "--policy", str(policy))
    assert gate.returncode == ExitCode.REGRESSION, gate.stdout + gate.stderr
    doc = json.loads((runs["faulty"] / "gate.json").read_text())
    failed = {(c["profile"], c["cache"], c["shots"]) for c in doc["checks"] if c["kind"] == "accuracy" and c["status"] == "regression"}
    assert failed == {("external", "on", RECORDS)}
    assert f"external/default cache=on shots={RECORDS}" in (runs["faulty"] / "gate-summary.md").read_text()
