"""`--sequential --executor slurm` on the real local Slurm: each part's job stops its own cells.

Two profiles, a and b, in front of one llama.cpp server; a healthy local sweep of both is the
baseline. The candidate runs on Slurm, one job per profile: a behind `evalctl canary --fault
lost-prefix`, b straight to the server. Each job decides its cells at its share of alpha
(`cluster.submit.part_config`: half each here); the aggregation job folds both parts'
decisions into the manifest and gates them as one family. prefix-recall, one cell per
profile, as tests/test_sequential_cpu.py but with 40 records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import canary_in_front, evalctl, needs_slurm, only_run, require_slurm_up, write_sweep_config

from evalctl.cluster.submit import part_config
from evalctl.schema import SweepConfig

pytestmark = [pytest.mark.server, *needs_slurm]

# 40 records (about 380 prompt tokens, recalled about half the time) and 40 questions, first
# look at 20 (stopping and gate policy both at min_n 20): at 20 records the model recalled only
# a quarter, too few flips for the lost prefix to stop part a before its last look.
RECORDS, SEED, MIN_N = 40, 1, 20
MODEL = "bundled:smollm2-135m"


def profiles(a_url: str, b_url: str) -> list[dict]:
    external = {"engine": "llamacpp", "model_path": MODEL}
    return [{"name": name, "url": url, **external} for name, url in (("a", a_url), ("b", b_url))]


def config(tmp_path: Path, name: str, servers: list[dict]) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"min_n: {MIN_N}\n")  # the gate judges by the values the run stopped by
    path = write_sweep_config(
        tmp_path,
        None,
        servers,
        task="prefix-recall",
        shots=[RECORDS],
        limit=RECORDS,
        concurrency=2,
        generation={"max_tokens": 5, "seed": SEED},
        slurm={"cpus_per_task": 1, "time": "00:20:00", "aggregate_time": "00:10:00"},
        stopping={"min_n": MIN_N},
        gate_policy=str(policy),
    )
    return path.rename(tmp_path / f"{name}.yaml")


def test_each_part_splits_alpha_by_its_cells(tmp_path):
    cfg = SweepConfig.model_validate(
        {
            "model": "m",
            "shots": [1, 2, 3],
            "cache": ["on"],
            "stopping": {"mode": "sequential", "baseline": str(tmp_path)},
            "servers": [{"name": p, "url": f"http://{p}", "model_path": MODEL} for p in "ab"],
        }
    )
    shares = [part_config(cfg, p, cfg.variants[0]).stopping.regression_share for p in cfg.servers]
    assert shares == [pytest.approx(0.5), pytest.approx(0.5)]
    fixed = cfg.model_copy(update={"stopping": cfg.stopping.model_copy(update={"mode": "fixed"})})
    assert part_config(fixed, cfg.servers[0], cfg.variants[0]).stopping.regression_share == 1.0


@pytest.mark.rotating(slice=2)
def test_a_lost_prefix_part_stops_early_on_slurm_and_the_run_gates_as_one_family(tmp_path, no_orphans, cpu_server):
    require_slurm_up()
    server_url = cpu_server
    with canary_in_front(cpu_server) as canary_url:
        base_cfg = config(tmp_path, "baseline", profiles(server_url, server_url))
        made = evalctl("sweep", "--config", str(base_cfg), "--output", str(tmp_path / "baseline"), timeout=1800)
        assert made.returncode == 0, made.stdout + made.stderr
        baseline = only_run(tmp_path / "baseline")
        cand_cfg = config(tmp_path, "candidate", profiles(canary_url, server_url))
        args = ("--executor", "slurm", "--wait", "--sequential", "--baseline", str(baseline), "--output", str(tmp_path / "cand"))
        ran = evalctl("sweep", "--config", str(cand_cfg), *args, timeout=2400)
    run = only_run(tmp_path / "cand")
    assert (run / "gate.json").is_file(), f"exit {ran.returncode}, no gate.json: {ran.stdout}{ran.stderr}"
    gate = json.loads((run / "gate.json").read_text())
    assert ran.returncode == gate["exit_code"] == 1, ran.stdout + ran.stderr
    assert gate["verdict"] == "regression"

    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["executor"] == "slurm" and manifest["status"] == "complete"
    decided = {d["profile"]: d for d in manifest["decisions"]}  # folded from the parts' state files
    assert set(decided) == {"a", "b"}
    assert decided["a"]["verdict"] == "regression" and decided["a"]["answered"] < RECORDS  # stopped early, in its own job
    assert decided["b"]["verdict"] != "regression"
    records = pd.read_parquet(run / "samples.parquet")
    assert (records["profile"] == "a").sum() == decided["a"]["answered"]  # the rest never sent
    shown = {c["profile"]: c["status"] for c in gate["checks"] if c["kind"] == "sequential"}
    assert shown == {"a": "regression", "b": decided["b"]["verdict"]}
    a, b = decided["a"], decided["b"]
    print(f"slurm sequential: a regression after {a['answered']} of {RECORDS}; b {b['verdict']} after {b['answered']}")
