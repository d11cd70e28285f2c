"""The agreement floor on the real llama.cpp CPU server: a sweep with the A/A arm on, judged by
`configs/gate/agreement-floor.yaml`, is no regression on the healthy server and a regression behind
the lost-prefix canary, whose warm answers differ from the cold ones far beyond the cold-vs-cold floor.

Small on purpose (the machine is shared): prefix-recall, 12 records and as many questions, 5 tokens an answer,
the policy's min_n lowered to 12 (all 12 warm answers differing from cold ones is far beyond a floor of none plus 0.10).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import cli, cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.errors import ExitCode

pytestmark = pytest.mark.server
RECORDS = QUESTIONS = 12
POLICY = Path(__file__).resolve().parents[1] / "configs" / "gate" / "agreement-floor.yaml"


def floor_findings(cpu_server: str, tmp_path, *extra: str) -> tuple[int, list[dict]]:
    config = write_sweep_config(
        tmp_path, None, [cpu_profile()], task="prefix-recall", shots=[RECORDS], cache=["off", "on"], limit=QUESTIONS, noise=True,
        generation={"max_tokens": 5},
    )  # fmt: skip
    out = evalctl("sweep", "--config", str(config), "--url", cpu_server, "--output", str(tmp_path / "out"), *extra, timeout=1200)
    assert out.returncode == 0, out.stderr + out.stdout
    run = only_run(tmp_path / "out")
    assert (run / "noise-external-default.jsonl").is_file()
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**yaml.safe_load(POLICY.read_text()), "min_n": QUESTIONS}))
    gate = cli("gate", str(run), "--policy", str(policy))
    doc = json.loads((run / "gate.json").read_text())
    return gate.returncode, [c for c in doc["checks"] if c["kind"] == "agreement-floor"]


@pytest.mark.rotating(slice=0)
def test_the_healthy_server_stays_within_its_floor(cpu_server, tmp_path, no_orphans):
    code, (check,) = floor_findings(cpu_server, tmp_path)
    print(f"healthy: {check['status']}; {check['reason']}")
    assert (check["cache"], check["shots"], check["n"]) == ("on", RECORDS, QUESTIONS)
    assert check["status"] != "regression" and code != ExitCode.REGRESSION, check["reason"]


@pytest.mark.rotating(slice=0)
def test_the_lost_prefix_canary_disagrees_beyond_the_floor(cpu_server, tmp_path, no_orphans):
    code, (check,) = floor_findings(cpu_server, tmp_path, "--canary", "lost-prefix")
    print(f"lost-prefix: {check['status']}; {check['reason']}")
    assert check["status"] == "regression" and code == ExitCode.REGRESSION, check["reason"]
