"""Finish a run folder from its records alone: summary files and plots, then the gate's files.

The one step every finished run gets when nobody is watching (the cluster's aggregation
job); new per-run outputs (e.g. an HTML report) belong here so every such run has them.
"""

from __future__ import annotations

from pathlib import Path

from evalctl.analysis.gate import GatePolicy, GateResult, evaluate, load_policy
from evalctl.report.gate_outputs import write_gate_outputs
from evalctl.report.outputs import write_run_summary
from evalctl.runs import load_run


def finish_run(run_dir: Path, policy: GatePolicy | None = None) -> GateResult:
    """Write the run's outputs and gate files (gate.json ...); the gate's result. RunFolderError for an unreadable run."""
    run = load_run(run_dir)
    write_run_summary(run, run_dir)
    result = evaluate(run, policy or load_policy(None))
    write_gate_outputs(result, run_dir)
    return result
