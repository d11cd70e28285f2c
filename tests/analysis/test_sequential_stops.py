"""The sequential gate inside a run: the stopper's decisions over recorded answers, and the gate reading its stops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from frames import manifest_for, sweep_frame

from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.config import CacheMode, StoppingConfig
from evalctl.execution.stopping import Stopper
from evalctl.manifest import CellStop
from evalctl.plan import Cell
from evalctl.runs import Run
from evalctl.tasks.lmeval import Prompt

N = 200
SHOTS = (8, 16)
CELLS = [Cell("cpu", "default", CacheMode(cache), shots, 1) for cache in ("off", "on") for shots in SHOTS]


def prompts(shots: int) -> list[Prompt]:
    order = np.random.default_rng(7).permutation(N)  # the seeded send order: any prefix a random sample
    return [Prompt(int(d), f"p{d}", f"{shots}-{d}", "q", "t", (), {}) for d in order]


def stopper(candidate, stops: list[CellStop], saves: list[int]) -> Stopper:
    config = StoppingConfig(mode="sequential", baseline=Path("base"))
    return Stopper(config, sweep_frame(N, SHOTS, run_id="base"), CELLS, N, stops=stops, save=lambda: saves.append(1), recorded=candidate)


def run_cells(candidate) -> tuple[dict[Cell, CellStop | None], list[CellStop], list[int]]:
    """Every cell through its looks as the sweep runs them; the stop of each, the manifest's stops, the saves."""
    stops, saves = [], []
    gate = stopper(candidate, stops, saves)
    found = {}
    for cell in CELLS:
        gate.start(cell, prompts(cell.shots))
        found[cell] = next((stop for look in range(len(gate.look_sizes)) if (stop := gate.check(cell, look))), None)
    return found, stops, saves


def test_a_collapsed_cell_stops_early_with_a_regression_and_healthy_cells_never_do():
    collapsed = Cell("cpu", "default", CacheMode.on, 16, 1)
    found, stops, saves = run_cells(sweep_frame(N, SHOTS, to_wrong={16: set(range(0, 160, 2))}, run_id="cand"))
    stop = found[collapsed]
    assert stop is not None and stop.reason == "regression"
    assert stop.answered <= 0.3 * N and stop.saved == N - stop.answered and stop.planned == N
    assert all(s is None or s.reason == "pass" for c, s in found.items() if c != collapsed)
    assert stops == [s for s in found.values() if s is not None] and len(saves) == len(stops)


def test_a_healthy_run_passes_cells_before_their_last_question():
    found, _, _ = run_cells(sweep_frame(N, SHOTS, run_id="cand"))
    assert {s.reason for s in found.values() if s} == {"pass"}
    assert all(s is not None and s.answered < N for s in found.values())


def test_a_cell_is_not_judged_on_a_look_it_has_not_fully_answered():
    candidate = sweep_frame(N, SHOTS, to_wrong={16: set(range(160))}, run_id="cand")
    candidate = candidate[~((candidate["shots"] == 16) & (candidate["cache"] == "on") & (candidate["doc_id"] == prompts(16)[0].doc_id))]
    gate = stopper(candidate, [], [])
    cell = Cell("cpu", "default", CacheMode.on, 16, 1)
    gate.start(cell, prompts(16))
    assert all(gate.check(cell, look) is None for look in range(len(gate.look_sizes)))


@pytest.mark.parametrize("reason", ["regression", "pass"])
def test_the_gate_accepts_a_stopped_cell_and_shows_its_stop(reason):
    base = sweep_frame(N, SHOTS, run_id="base")
    cand = sweep_frame(N, SHOTS, run_id="cand", to_wrong={16: set(range(0, 160, 2))} if reason == "regression" else None)
    order = [p.doc_id for p in prompts(16)][:40]
    stopped = (cand["cache"] == "on") & (cand["shots"] == 16)
    cand = cand[~stopped | cand["doc_id"].isin(order)]
    manifest = manifest_for(cand, limit=N)
    manifest.stops = [
        CellStop(profile="cpu", variant="default", cache="on", shots=16, pass_index=1, reason=reason, look=3, answered=40, planned=N)
    ]
    result = evaluate(Run(Path("cand"), manifest, cand), GatePolicy(), Run(Path("base"), manifest_for(base), base))
    completeness = [c for c in result.checks if c.kind == "completeness"]
    assert [c.status for c in completeness] == ["pass", "pass"]
    (shown,) = [c for c in result.checks if c.kind == "sequential"]
    assert (shown.status, shown.shots, shown.value) == (reason, 16, N - 40)
    assert f"{N - 40} requests saved" in shown.reason
    (versus,) = [c for c in result.checks if c.name == "run vs baseline" and c.cache == "on" and c.shots == 16]
    assert versus.status == reason and versus.n == 40
