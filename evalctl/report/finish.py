"""Finish a run folder from its records alone: summary files and plots, the gate's files, the HTML report.

The one step every finished run gets, watched or not (the cluster's aggregation job): new per-run outputs belong here.
"""

from __future__ import annotations

from evalctl.analysis.gate import GatePolicy, GateResult, evaluate, load_policy
from evalctl.analysis.gate_document import GateDocument
from evalctl.report.gate_outputs import write_gate_outputs
from evalctl.report.html import write_report
from evalctl.report.outputs import write_run_summary
from evalctl.runs import Run

REPORT_FILE = "report.html"


def finish_run(run: Run, policy: GatePolicy | None = None, baseline: Run | None = None) -> GateResult:
    """Write the run's outputs, gate files (gate.json ...) and report.html; the gate's result
    (by default the policy the run's config names, else the built-in; against `baseline`, if given)."""
    policy = (policy or load_policy(run.manifest.gate_policy)).for_run(run)
    write_run_summary(run, policy.metric)
    result = evaluate(run, policy, baseline)
    write_gate_outputs(result, run.path)
    write_report(run, run.path / REPORT_FILE, baseline=baseline, gate=GateDocument.of(result))
    return result
