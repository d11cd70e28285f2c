"""A hunt's follow-up on a real llama.cpp server (`hunt.follow`): copies of one conversation up to a return, the
return judged with its references on both arms, and a healthy build's follow-up a pass."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import cpu_profile, only_run, write_sweep_config
from test_reliability_cpu import start

from evalctl.errors import ExitCode


@pytest.mark.rotating(slice=1)  # slow, and not the follow-up's only check (tests/analysis/test_leads.py): rotates
def test_a_healthy_builds_follow_up_answers_every_copy_and_passes(tmp_path, no_orphans):
    servers = [cpu_profile(threads=1, parallel=1)]
    cfg = write_sweep_config(
        tmp_path, None, servers, workload="hunt", cache=["on", "off"], hunt={"follow": [{"conversation": 1, "ret": 2}]}
    )
    proc = start(tmp_path, "sweep", "--config", str(cfg))
    assert proc.wait(timeout=600) == 0, (tmp_path / "evalctl.out").read_text()
    run = only_run(tmp_path / "out")
    samples = pd.read_parquet(run / "samples.parquet")
    warm = samples[samples["cache"] == "on"].sort_values("doc_id")
    assert len(warm) == len(samples[samples["cache"] == "off"]) == 30 and samples["error"].isna().all()
    returns = warm[warm["turn_kind"].isin(["rewind", "branch"])]
    assert len(returns) == warm["conversation"].nunique() == 10  # one judged return a copy, enough copies for 30
    assert (returns.groupby("conversation")["doc_id"].max() == warm.groupby("conversation")["doc_id"].max()).all()  # its last
    assert returns["turn"].nunique() == 1 and (returns["cached_tokens"] > 0).all()  # one shape; the cache engaged
    proc = start(tmp_path, "gate", str(run))
    assert proc.wait(timeout=120) == ExitCode.PASS, (tmp_path / "evalctl.out").read_text()
    (check,) = [c for c in json.loads((run / "gate.json").read_text())["checks"] if c["kind"] == "divergence"]
    assert check["status"] == "pass" and check["n"] == 10
