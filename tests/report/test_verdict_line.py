"""The sweep's "verdict rests on" line: the deciding checks by kind and one of them, its cell shown whole."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from evalctl.analysis.gate import Check, GatePolicy, GateResult
from evalctl.report.terminal import verdict_basis


def test_the_example_check_names_its_cell_and_a_run_wide_one_has_no_empty_brackets():
    cell = Check("cache on vs off", "accuracy", "inconclusive", "only 2 pairs", profile="cpu", variant="default", cache="on", shots=20)
    run_wide = Check("run complete", "completeness", "pass", "all 4 planned cells have every question")
    line = verdict_basis(GateResult("inconclusive", GatePolicy(), "r", None, [run_wide, cell], pd.DataFrame()))
    assert line == "inconclusive from 1 of 1 accuracy checks; e.g. cache on vs off [cpu/default cache=on shots=20]: only 2 pairs"
    assert "[]" not in verdict_basis(GateResult("pass", GatePolicy(), "r", None, [run_wide], pd.DataFrame()))
    shown = io.StringIO()
    Console(file=shown, width=200).print(line, markup=False)  # as the sweep prints it: the cell is not a style tag
    assert "[cpu/default cache=on shots=20]" in shown.getvalue()
