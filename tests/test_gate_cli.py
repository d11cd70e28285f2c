"""`evalctl gate`, `compare` and `analyze` over run folders written the way a sweep writes them (no server)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from analysis.frames import manifest_for, sweep_frame
from typer.testing import CliRunner

from evalctl.cli import app
from evalctl.errors import ExitCode
from evalctl.manifest import write_manifest
from evalctl.records import RecordWriter, SampleRecord, compact

CHECK_KEYS = {"name", "kind", "family", "profile", "variant", "cache", "shots", "concurrency", "pass_index", "status", "reason",
              "metric", "value", "threshold", "p_value", "p_adjusted", "lower", "upper", "b", "c", "n", "comparison"}  # fmt: skip


def write_run(root: Path, name: str, df, status: str = "complete", parquet: bool = True) -> Path:
    run = root / name
    run.mkdir()
    df = df.assign(run_id=name)
    with RecordWriter(run) as writer:
        for row in df.to_dict("records"):
            writer.write(SampleRecord.from_row({k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}))
    write_manifest(run, manifest_for(df).model_copy(update={"run_id": name, "status": status}))
    if parquet:
        compact(run)
    return run


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    flipped = set(range(30))
    return {
        "bad": write_run(root, "bad", sweep_frame(to_wrong={16: flipped, 20: flipped})),
        "good": write_run(root, "good", sweep_frame(), parquet=False),  # live records.jsonl only
        "small": write_run(root, "small", sweep_frame(n=10, to_wrong={s: {0, 1} for s in (8, 16, 20)})),
        "stopped": write_run(root, "stopped", sweep_frame(n=40), status="interrupted"),
        "other": write_run(root, "other", sweep_frame(n=40).assign(prompt_hash="other-fewshot")),
    }


def test_gate_exit_codes_and_files(runs, tmp_path):
    assert cli("gate", str(runs["good"])).exit_code == ExitCode.PASS
    assert cli("gate", str(runs["small"])).exit_code == ExitCode.INCONCLUSIVE
    out = cli("gate", str(runs["stopped"]))
    assert out.exit_code == ExitCode.INCONCLUSIVE and "incomplete" in out.stdout
    out = cli("gate", str(runs["bad"]), "--output", str(tmp_path / "gate"))
    assert out.exit_code == ExitCode.REGRESSION, out.stdout
    text = " ".join(out.stdout.split())  # table titles wrap to the table's width
    assert "regression" in text and "Cliffs: cache-on accuracy" in text and "described, not judged" in text
    # The verdict names its evidence: the two regressed cells, their counts, the requests that part earliest
    # (all at "#### " here, so those with the most cached tokens first).
    decided = "verdict: regression (exit 1), decided by 2 checks: cache on vs off [cpu/default cache=on shots=16 conc=4 pass=1]"
    assert f"{decided}: b 30, c 0, n 200" in text
    assert "doc 29: parts at character 5; 2429 prompt, 2369 cached tokens doc 28:" in text

    doc = json.loads((tmp_path / "gate" / "gate.json").read_text())
    assert set(doc) == {"schema_version", "verdict", "exit_code", "policy", "run", "baseline", "checks", "cliffs", "evidence"}
    evidence = doc["evidence"]
    assert [(c["where"], c["b"], [r["doc_id"] for r in c["worst"]]) for c in evidence["checks"]] == [
        ("cpu/default cache=on shots=16 conc=4 pass=1", 30, [29, 28, 27]),
        ("cpu/default cache=on shots=20 conc=4 pass=1", 30, [29, 28, 27]),
    ]
    assert (doc["verdict"], doc["exit_code"], doc["run"], doc["baseline"]) == ("regression", 1, "bad", None)
    assert all(set(c) == CHECK_KEYS for c in doc["checks"])
    assert {(c["cache"], c["shots"]) for c in doc["checks"] if c["kind"] == "accuracy" and c["status"] == "regression"} == {
        ("on", 16),
        ("on", 20),
    }
    assert {c["column"] for c in doc["cliffs"]} == {"prompt_tokens", "cached_tokens"}

    suite = ET.parse(tmp_path / "gate" / "gate-junit.xml").getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(doc["checks"]) == int(suite.get("tests"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == sum(c["status"] == "regression" for c in doc["checks"]) == int(suite.get("failures"))
    markdown = (tmp_path / "gate" / "gate-summary.md").read_text()
    assert markdown.startswith("## evalctl gate: ❌ regression (exit 1)")
    assert "shots=16" in markdown and "shots=8 " not in markdown


def test_gate_against_a_baseline_and_through_the_real_entry_point(runs):
    proc = subprocess.run([sys.executable, "-m", "evalctl.cli", "gate", str(runs["bad"]), "--baseline", str(runs["good"])],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == ExitCode.REGRESSION, proc.stderr
    doc = json.loads((runs["bad"] / "gate.json").read_text())
    assert doc["baseline"] == "good"
    assert {c["shots"] for c in doc["checks"] if c["name"] == "run vs baseline" and c["status"] == "regression"} == {16, 20}


def test_compare_side_by_side_with_flips(runs, tmp_path):
    out = cli("compare", str(runs["good"]), str(runs["bad"]), "--flips-csv", str(tmp_path / "flips.csv"), "--show", "3")
    assert out.exit_code == 0, out.stdout
    assert "Flipped questions (3 of 60)" in out.stdout
    flipped = pd.read_csv(tmp_path / "flips.csv")
    assert len(flipped) == 60 and set(flipped["shots"]) == {16, 20} and set(flipped["direction"]) == {"right->wrong"}
    first = flipped.iloc[0]
    assert (first.question, first.reference_answer, first.candidate_answer, first.candidate_response) == ("question 0?", 0, -1, "#### -1")


def test_analyze_adds_paired_table_and_cliff(runs):
    out = cli("analyze", str(runs["bad"]))
    assert out.exit_code == 0, out.stdout
    assert "Paired strict accuracy" in out.stdout and "Cliffs" in out.stdout
    assert "McNemar" not in out.stdout  # one statistic per question: the gate's
    assert (runs["bad"] / "accuracy_vs_prefill_length.png").is_file()


@pytest.mark.parametrize("command", ["gate", "compare", "analyze"])
def test_missing_corrupt_or_unrelated_runs_are_clear_errors(runs, tmp_path, command):
    def run(*folders):
        args = [command, *map(str, folders)]
        if command == "gate" and len(folders) == 2:
            args = ["gate", str(folders[0]), "--baseline", str(folders[1])]
        out = cli(*args)
        return out.exit_code, out.output

    pair = command != "analyze"
    missing = run(tmp_path / "nope", runs["good"]) if pair else run(tmp_path / "nope")
    assert missing[0] == ExitCode.BAD_INPUT and "not a directory" in missing[1]
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "manifest.json").write_text("{not json")
    (corrupt / "records.jsonl").write_text("")
    code, text = run(runs["good"], corrupt) if pair else run(corrupt)
    assert code == ExitCode.BAD_INPUT and "manifest.json is corrupt" in text
    if pair:
        code, text = run(runs["other"], runs["good"])
        assert code == ExitCode.BAD_INPUT and "share no questions" in text


def test_bisect_exit_codes_are_what_git_bisect_run_reads(runs):
    assert cli("gate", str(runs["good"]), "--bisect-exit-codes").exit_code == 0
    assert cli("gate", str(runs["bad"]), "--bisect-exit-codes").exit_code == 1
    out = cli("gate", str(runs["small"]), "--bisect-exit-codes")
    assert out.exit_code == 125 and "(exit 125)" in out.stdout
    assert cli("gate", str(runs["small"] / "missing"), "--bisect-exit-codes").exit_code == 128  # git bisect stops


def test_the_paired_table_prints_the_gates_own_interval_and_p_beside_each_verdict(runs, tmp_path):
    # Issue 35: the table printed McNemar p-values and its own Holm column while the gate decided
    # by the skew-corrected score rule; now each row is an accuracy check of gate.json.
    out = cli("analyze", str(runs["bad"]))
    assert out.exit_code == 0, out.stdout
    assert cli("gate", str(runs["bad"]), "--output", str(tmp_path)).exit_code == ExitCode.REGRESSION
    checks = [c for c in json.loads((tmp_path / "gate.json").read_text())["checks"] if c["kind"] == "accuracy"]
    text = " ".join(out.stdout.split())
    assert len(checks) == 3 and "90% interval" in text
    for check in checks:
        assert check["lower"] <= check["value"] <= check["upper"]
        row = f"{check['shots']} {check['n']} {check['b']} {check['c']} {check['value']:.3f} [{check['lower']:.3f},{check['upper']:.3f}]"
        assert row in text and check["status"] in text
