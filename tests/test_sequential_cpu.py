"""The sequential gate against the real CPU server: a lost prefix stops early as a regression, a healthy run never does.

One llama.cpp server; a healthy complete sweep of it is the `--baseline`. A candidate behind
`evalctl canary --fault lost-prefix` runs with `--sequential`: recall collapses, so its cell
must stop with a regression after at most 30% of its planned requests, and the requests it
did not send must be recorded as saved, not missing. A second, healthy candidate against the
same baseline must never be judged a regression. A copy of the lost-prefix run cut inside its
first look and taken up with `--resume` must send only the rest of that look and reach the
same decision. prefix-recall, one cell, cache on: the questions ask records of one prefix the
small model recalls (see RECORDS).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import canary_in_front, cli, cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.errors import ExitCode

pytestmark = pytest.mark.server

RECORDS = 100  # questions = records (one question per record); the first look, at 30, is 30% of them
# The drawn prefix sets how much the small model recalls (README, prefix-recall); seed 1's
# 100 records are recalled about 40% of the time, room for a lost prefix to show by 30 pairs.
SEED = 1
KEPT = 20  # rows the interrupted copy of the lost-prefix run keeps, inside its first look


def interrupted_copy(run: Path, root: Path, keep: int) -> Path:
    """`run` as if interrupted after its first `keep` rows: no decision yet, status interrupted."""
    copy = root / run.name
    shutil.copytree(run, copy)
    rows = (copy / "records.jsonl").read_text().splitlines(keepends=True)[:keep]
    (copy / "records.jsonl").write_text("".join(rows))
    (copy / "samples.parquet").unlink()
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted", "decisions": []}))
    return copy


def sweep(cfg, url: str, out, *extra: str):
    result = evalctl("sweep", "--config", str(cfg), "--url", url, "--output", str(out), *extra, timeout=1800)
    assert result.returncode == 0, result.stderr + result.stdout
    return only_run(out), result.stdout


@pytest.mark.rotating(slice=1)
def test_lost_prefix_stops_early_as_a_regression_and_a_healthy_candidate_never_does(tmp_path, no_orphans, cpu_server):
    server_url = cpu_server
    with canary_in_front(server_url) as canary_url:
        cfg = write_sweep_config(
            tmp_path,
            None,
            [cpu_profile()],
            task="prefix-recall",
            shots=[RECORDS],
            limit=RECORDS,
            concurrency=2,
            generation={"max_tokens": 5, "seed": SEED},
        )
        baseline, _ = sweep(cfg, server_url, tmp_path / "baseline")
        faulty, faulty_out = sweep(cfg, canary_url, tmp_path / "faulty", "--sequential", "--baseline", str(baseline))
        healthy, _ = sweep(cfg, server_url, tmp_path / "healthy", "--sequential", "--baseline", str(baseline))
        resumed = interrupted_copy(faulty, tmp_path / "resumed", keep=KEPT)
        result = evalctl("sweep", "--resume", str(resumed), timeout=1800)
        assert result.returncode == 0, result.stderr + result.stdout

    base = pd.read_parquet(baseline / "samples.parquet")
    assert len(base) == RECORDS and base.strict_correct.mean() >= 0.25  # room for a lost prefix to show

    manifest = json.loads((faulty / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    (stop,) = manifest["decisions"]
    assert stop["verdict"] == "regression" and stop["planned"] == RECORDS
    assert stop["answered"] <= 0.3 * RECORDS
    records = pd.read_parquet(faulty / "samples.parquet")
    assert len(records) == stop["answered"] and records.error.isna().all()  # the rest were never sent
    print(f"lost prefix: regression after {stop['answered']} of {RECORDS} questions (look {stop['look']})")
    assert "Sequential decisions" in faulty_out and f"{RECORDS - stop['answered']} of {RECORDS} requests saved" in faulty_out

    gate = json.loads((faulty / "gate.json").read_text())
    assert gate["verdict"] == "regression"
    assert [c["status"] for c in gate["checks"] if c["kind"] == "completeness"] == ["pass", "pass"]  # stopped is complete
    (shown,) = [c for c in gate["checks"] if c["kind"] == "sequential"]
    assert shown["status"] == "regression" and f"{RECORDS - stop['answered']} requests saved" in shown["reason"]
    assert "Sequential decisions" in (faulty / "report.html").read_text()
    again = cli("gate", str(faulty), "--baseline", str(baseline))
    assert again.returncode == ExitCode.REGRESSION, again.stdout + again.stderr

    # Resumed mid-cell, the run sends only what its first look still lacks and decides as before.
    taken_up = json.loads((resumed / "manifest.json").read_text())
    assert taken_up["status"] == "complete" and taken_up["decisions"] == manifest["decisions"]
    assert taken_up["resumes"][-1]["finished_requests"] == KEPT
    assert len(pd.read_parquet(resumed / "samples.parquet")) == stop["answered"]

    calm = json.loads((healthy / "manifest.json").read_text())
    assert calm["status"] == "complete" and [d["verdict"] for d in calm["decisions"]] != ["regression"]
    verdicts = json.loads((healthy / "gate.json").read_text())["checks"]
    assert not [c for c in verdicts if c["kind"] in ("accuracy", "sequential") and c["status"] == "regression"]


SMALL, LARGE = 2, 40  # prefix-recall without a limit asks k questions at k records: two cells of different sizes


def test_each_cell_is_stopped_by_its_own_planned_size_also_when_resumed(tmp_path, no_orphans, cpu_server):
    """Cells at two shot counts hold 2 and 40 questions: each is judged against its own planned size.

    Sized by the first cell's count, the 40-question cell sent 2 and ended there, short forever
    (a --resume had nothing to send either)."""
    cfg = write_sweep_config(
        tmp_path, None, [cpu_profile()], task="prefix-recall", shots=[SMALL, LARGE], limit=None, concurrency=2,
        generation={"max_tokens": 5, "seed": SEED},
    )  # fmt: skip
    baseline, _ = sweep(cfg, cpu_server, tmp_path / "baseline")
    candidate, _ = sweep(cfg, cpu_server, tmp_path / "candidate", "--sequential", "--baseline", str(baseline))
    resumed = interrupted_copy(candidate, tmp_path / "resumed", keep=KEPT)
    result = evalctl("sweep", "--resume", str(resumed), timeout=1800)
    assert result.returncode == 0, result.stderr + result.stdout

    for run in (candidate, resumed):
        decisions = {d["shots"]: d for d in json.loads((run / "manifest.json").read_text())["decisions"]}
        assert {shots: d["planned"] for shots, d in decisions.items()} == {SMALL: SMALL, LARGE: LARGE}
        sent = pd.read_parquet(run / "samples.parquet").groupby("shots").size().to_dict()
        assert sent == {shots: d["answered"] for shots, d in decisions.items()}
        gate = json.loads((run / "gate.json").read_text())
        assert [c["status"] for c in gate["checks"] if c["kind"] == "completeness"] == ["pass", "pass"], gate["checks"]
