"""Shipped aliases, swept as a user would against the shared CPU server, then gated with no extra flag.

Issue 35: (1) the completeness check reads each cell's questions from the plan: `--shots 1,2,8
--limit 6` plans 6 questions a cell (6, 3 and 1 record lists; before session 22 a list bounded a
cell, 1, 2 and 6, and the small cells were called incomplete forever), and the gate judges the run. (2) A `--sequential` sweep of an
alias takes its stopping rule's tolerance, alpha, metric and min_n from the alias's gate policy,
so a plain `evalctl gate RUN` reads its decisions (before, the default `stopping:` values
disagreed with cpu-smoke and the gate exited 4). Small on purpose: a few questions per cell.
"""

from __future__ import annotations

import json

import pytest
from conftest import evalctl, only_run

from evalctl.config import load_config
from evalctl.config_files import known
from evalctl.errors import VERDICT_EXIT

pytestmark = pytest.mark.server

VERDICT_CODES = {int(code) for code in VERDICT_EXIT.values()}
# The aliases whose servers run on this machine's CPU server (llama.cpp); others need a GPU or a vLLM venv.
CPU_ALIASES = [name for name in known() if {p.engine.name for p in load_config(model=name).servers} == {"llamacpp"}]


@pytest.mark.rotating(slice=0)
def test_recall_cells_of_one_two_and_eight_records_under_one_limit_are_planned_complete_and_judged(tmp_path, cpu_server):
    out = evalctl("sweep", "--model", "smollm2-135m", "--url", cpu_server, "--shots", "1,2,8", "--limit", "6",
                  "--output", str(tmp_path), timeout=1200)  # fmt: skip
    assert out.returncode in VERDICT_CODES, out.stderr + out.stdout
    run = only_run(tmp_path)
    planned = json.loads((run / "manifest.json").read_text())["plan"]  # each cell's planned questions
    assert {cell["shots"]: cell["questions"] for cell in planned} == {1: 6, 2: 6, 8: 6}
    gate = evalctl("gate", str(run), "--output", str(tmp_path / "gate"))
    assert gate.returncode in VERDICT_CODES, gate.stderr + gate.stdout
    checks = json.loads((tmp_path / "gate" / "gate.json").read_text())["checks"]
    assert [c["status"] for c in checks if c["kind"] == "completeness"] == ["pass"], checks


@pytest.mark.rotating(slice=0)
@pytest.mark.parametrize("alias", [a for a in CPU_ALIASES if load_config(model=a).workload is None])  # a workload is refused
def test_a_sequential_sweep_of_a_shipped_alias_is_gated_by_its_policy_with_no_extra_flag(alias, tmp_path, cpu_server):
    small = ["--url", cpu_server, "--shots", "2", "--limit", "4", "--cache", "on"]
    base = evalctl("sweep", "--model", alias, *small, "--output", str(tmp_path / "base"), timeout=1200)
    assert base.returncode in VERDICT_CODES, base.stderr + base.stdout
    seq = evalctl("sweep", "--model", alias, *small, "--sequential", "--baseline", str(only_run(tmp_path / "base")),
                  "--output", str(tmp_path / "seq"), timeout=1200)  # fmt: skip
    assert seq.returncode in VERDICT_CODES, seq.stderr + seq.stdout
    run = only_run(tmp_path / "seq")
    gate = evalctl("gate", str(run), "--output", str(tmp_path / "gate"))
    assert gate.returncode in VERDICT_CODES, gate.stderr + gate.stdout
    document = json.loads((tmp_path / "gate" / "gate.json").read_text())
    assert any(c["kind"] == "sequential" for c in document["checks"])  # judged by the run's own decisions
    stopping = json.loads((run / "manifest.json").read_text())["config"]["stopping"]
    assert (stopping["tolerance"], stopping["alpha"], stopping["min_n"]) == tuple(
        document["policy"][k] for k in ("max_accuracy_drop", "alpha", "min_n")
    )
