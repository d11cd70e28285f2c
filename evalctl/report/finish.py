"""Finish a run folder from its records alone: summary files and plots, the gate's files, the HTML report.

The one step every finished run gets when nobody is watching (the cluster's aggregation
job); new per-run outputs (e.g. an HTML report) belong here so every such run has them.
"""

from __future__ import annotations

from pathlib import Path

from evalctl.analysis.gate import GatePolicy, GateResult, RunFrames, evaluate, load_policy
from evalctl.config import gate_policy_file
from evalctl.report.gate_outputs import gate_document, write_gate_outputs
from evalctl.report.html import write_report
from evalctl.report.outputs import write_run_summary
from evalctl.runs import load_run


def run_policy(run: RunFrames) -> GatePolicy:
    """The gate policy the run's config names (`gate_policy`), else the built-in; PolicyError if unreadable."""
    return load_policy(gate_policy_file(run.manifest.get("config", {}).get("gate_policy")))


def finish_run(run_dir: Path, policy: GatePolicy | None = None) -> GateResult:
    """Write the run's outputs, gate files (gate.json ...) and report.html; the gate's result (`run_policy` by default).

    RunFolderError for an unreadable run.
    """
    run = load_run(run_dir)
    write_run_summary(run, run_dir)
    result = evaluate(run, policy or run_policy(run))
    write_gate_outputs(result, run_dir)
    write_report(run_dir, run_dir / "report.html", gate=gate_document(result))
    return result
