"""A hunt's follow-up on a real llama.cpp server: `evalctl sweep --follow RUN` (what a local hunt runs by itself when it
ends) sends copies of the lead's conversation up to its return into RUN/follow-up/, and RUN's gate reads their verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import cpu_profile, only_run, write_sweep_config
from test_reliability_cpu import start

from evalctl.config import load_config
from evalctl.errors import ExitCode
from evalctl.runs import FOLLOW_UP_DIR

sys.path.insert(0, str(Path(__file__).parent / "analysis"))
from test_divergence import run_with  # noqa: E402
from test_gate_cli import write_run  # noqa: E402


@pytest.mark.rotating(slice=1)  # slow, and not the follow-up's only check (tests/analysis/test_leads.py): rotates
def test_a_hunts_lead_is_followed_up_into_its_folder_and_judged_with_it(tmp_path, no_orphans):
    servers = [cpu_profile(threads=1, parallel=1)]
    config = load_config(config_file=write_sweep_config(tmp_path, None, servers, workload="hunt", cache=["on", "off"]))
    # The hunt as recorded, its records made up: conversation 5's second return drifted beyond the spread, undecided.
    hunt = write_run(tmp_path, "hunt", run_with({15: 0.5}, extend_shift=0.07).samples.assign(profile="cpu"))
    manifest = json.loads((hunt / "manifest.json").read_text())
    (hunt / "manifest.json").write_text(json.dumps({**manifest, "config": config.model_dump(mode="json")}))
    proc = start(tmp_path, "sweep", "--follow", str(hunt))
    assert proc.wait(timeout=600) == 0, (tmp_path / "evalctl.out").read_text()
    assert "gate of the hunt with its follow-up" in (tmp_path / "evalctl.out").read_text()
    follow = only_run(hunt / FOLLOW_UP_DIR)
    samples = pd.read_parquet(follow / "samples.parquet")
    warm = samples[samples["cache"] == "on"].sort_values("doc_id")
    assert len(warm) == len(samples[samples["cache"] == "off"]) == 30 and samples["error"].isna().all()
    returns = warm[warm["turn_kind"].isin(["rewind", "branch"])]
    assert len(returns) == warm["conversation"].nunique() == 10  # one judged return a copy, enough copies for 30
    assert (returns.groupby("conversation")["doc_id"].max() == warm.groupby("conversation")["doc_id"].max()).all()  # its last
    assert returns["turn"].nunique() == 1 and (returns["cached_tokens"] > 0).all()  # one shape; the cache engaged
    checks = json.loads((hunt / "gate.json").read_text())["checks"]  # written again by the follow-up
    (followed,) = [c for c in checks if c["kind"] == "follow-up"]
    (divergence,) = [c for c in checks if c["kind"] == "divergence"]
    assert followed["status"] == "pass" and followed["n"] == 10  # a healthy build's copies stay within the spread
    assert divergence["status"] == "warning" and "followed up" in divergence["reason"]
    proc = start(tmp_path, "sweep", "--follow", str(hunt))
    assert proc.wait(timeout=120) == ExitCode.BAD_INPUT and "followed up already" in (tmp_path / "evalctl.out").read_text()
