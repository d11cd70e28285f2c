"""A run folder written before issue 35 still reads: gate, report, dashboard and resume take it as written.

`runs-before-issue-35/` holds one finished run as evalctl wrote it at 8248f54 (its own Manifest,
RecordWriter and compaction; the config of `--model smollm2-135m --task gsm8k`, plus a profile
given by `--url` and llama.cpp): profiles of the flat shape (`context_length` beside `name`) and
engine `external` with `serves`, in the config and in the server entries. Months of nightly
history are in that shape; they are read in today's (`manifest._nested_engine`), never rewritten
by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import cli

from evalctl.config import validated
from evalctl.errors import ExitCode
from evalctl.manifest import read_manifest
from evalctl.servers.engines.llamacpp import LlamaCppSettings

OLD_RUNS = Path(__file__).parent / "runs-before-issue-35"


@pytest.fixture
def old_run(tmp_path) -> Path:
    """A copy of the old run folder (gate and report write into it), in a results root of its own."""
    (written,) = OLD_RUNS.iterdir()
    shutil.copytree(written, tmp_path / "results" / written.name)
    return tmp_path / "results" / written.name


def test_its_manifest_reads_in_todays_shape(old_run):
    as_written = json.loads((old_run / "manifest.json").read_text())
    assert as_written["config"]["servers"][0]["context_length"] == 8192 and as_written["config"]["servers"][1]["engine"] == "external"
    manifest = read_manifest(old_run)
    launched, at_url = validated(manifest.config).servers
    assert launched.engine == LlamaCppSettings(context_length=8192, parallel=4) and launched.url is None
    assert at_url.url == "http://127.0.0.1:8080" and at_url.engine.name == "llamacpp" and at_url.gpus_needed() == 0
    assert {(s.profile, s.engine) for s in manifest.servers} == {("cpu", "llamacpp"), ("external", "llamacpp")}


def test_gate_report_and_dashboard_read_it(old_run, tmp_path):
    gated = cli("gate", str(old_run), "--output", str(tmp_path / "gate"))
    # A verdict (10 questions a cell decide nothing), not a tool failure.
    assert gated.returncode == ExitCode.INCONCLUSIVE, gated.stdout + gated.stderr
    checks = json.loads((tmp_path / "gate" / "gate.json").read_text())["checks"]
    # Completeness re-plans the cells from the old config: 2 profiles x 2 cache modes x 2 shot counts, all found.
    (complete,) = [c for c in checks if c["kind"] == "completeness"]
    assert complete["status"] == "pass" and "all 8 planned cells" in complete["reason"], complete
    assert {c["comparison"] for c in checks if c["kind"] == "accuracy"} >= {"cache on vs off", "profile external vs cpu"}

    reported = cli("report", str(old_run))
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert "llamacpp" in (old_run / "report.html").read_text()

    site = tmp_path / "site"
    built = cli("dashboard", "--root", str(old_run.parent), "-o", str(site))
    assert built.returncode == 0, built.stdout + built.stderr
    assert old_run.name in (site / "index.html").read_text()


def test_it_resumes_with_its_meaning_unchanged(old_run):
    from evalctl.resume import resume_config

    config, run = resume_config(old_run, None, {})
    assert [s.name for s in config.servers] == ["cpu", "external"] and run.run_id == old_run.name
