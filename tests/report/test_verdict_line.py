"""The verdict lines: the sweep's "verdict rests on" (the deciding checks by kind and one of them, its cell shown
whole) and the evidence under the verdict (each deciding check, its counts, its worst requests)."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from evalctl.analysis.evidence import DecidingCheck, Evidence, PartedRequest
from evalctl.analysis.gate import Check, GatePolicy, GateResult
from evalctl.report.terminal import decided_by, evidence_view, verdict_basis


def test_the_example_check_names_its_cell_and_a_run_wide_one_has_no_empty_brackets():
    cell = Check("cache on vs off", "accuracy", "inconclusive", "only 2 pairs", profile="cpu", variant="default", cache="on", shots=20)
    run_wide = Check("run complete", "completeness", "pass", "all 4 planned cells have every question")
    line = verdict_basis(GateResult("inconclusive", GatePolicy(), "r", None, [run_wide, cell], pd.DataFrame()))
    assert line == "inconclusive from 1 of 1 accuracy checks; e.g. cache on vs off [cpu/default cache=on shots=20]: only 2 pairs"
    assert "[]" not in verdict_basis(GateResult("pass", GatePolicy(), "r", None, [run_wide], pd.DataFrame()))
    shown = io.StringIO()
    Console(file=shown, width=200).print(line, markup=False)  # as the sweep prints it: the cell is not a style tag
    assert "[cpu/default cache=on shots=20]" in shown.getvalue()


def test_the_evidence_under_the_verdict_line_fits_80_columns_keeps_its_brackets_and_counts_what_it_leaves_out():
    long_name = "run vs baseline: a check whose name and cell together run past eighty columns"
    worst = [PartedRequest(7, 12050, 11450, 0, "rewind"), PartedRequest(3, 900, None, 41)]
    checks = [DecidingCheck(long_name, "accuracy", "cpu/default cache=on shots=20 pass=1", "run vs baseline", 9, 1, 30, worst)]
    checks += [DecidingCheck(f"error rate {i}", "error_rate", "", n=30) for i in range(3)]
    shown = io.StringIO()
    console = Console(file=shown, width=80)
    console.print(f"verdict: inconclusive (exit 2){decided_by(Evidence('inconclusive', checks))}")
    console.print(evidence_view(Evidence("inconclusive", checks)))
    lines = shown.getvalue().splitlines()
    assert lines[0] == "verdict: inconclusive (exit 2), decided by 4 checks:"
    assert all(len(line) <= 80 for line in lines) and all(line.startswith("  ") for line in lines[1:])
    text = " ".join(line.strip() for line in lines)
    assert f"{long_name} [cpu/default cache=on shots=20 pass=1]: b 9, c 1, n 30" in text
    assert "doc 7 (rewind): parts at character 0; 12050 prompt, 11450 cached tokens" in text
    assert "doc 3: parts at character 41; 900 prompt, - cached tokens" in text
    assert [line for line in lines if line.startswith("    doc")][0].startswith("    doc 7")  # requests under their check
    assert lines[-1] == "  and 1 more (gate.json: evidence)" and "error rate 2" not in text
    assert decided_by(Evidence("pass")) == "" and decided_by(None) == ""
