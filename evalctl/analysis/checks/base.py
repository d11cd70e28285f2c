"""What a gate check is: each kind of check is one object with one interface (`GateCheck`).

`analysis.gate.evaluate` walks the registry (`evalctl.analysis.checks.CHECKS`) in order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from evalctl.analysis.gate_policy import GatePolicy, validated
from evalctl.analysis.noise import Noise
from evalctl.analysis.pairing import Comparison
from evalctl.cell import CellKey, cell_label
from evalctl.records import CELL_KEYS
from evalctl.runs import Run

Status = Literal["pass", "regression", "inconclusive", "warning"]
# Worst first: the one order of findings, for the verdict, the sign-off matrix and every "worst of".
STATUS_ORDER: tuple[Status, ...] = ("regression", "inconclusive", "warning", "pass")
SEVERITY = {status: rank for rank, status in enumerate(STATUS_ORDER)}


def worst(statuses) -> Status:
    """The worst of `statuses` in `STATUS_ORDER` (an unknown one counts as inconclusive); pass for none."""
    ranks = [SEVERITY.get(s, SEVERITY["inconclusive"]) for s in statuses]
    return STATUS_ORDER[min(ranks)] if ranks else "pass"


def verdict_of(statuses) -> Status:
    """The gate's verdict: the worst finding, where a warning does not change a pass."""
    found = worst(statuses)
    return "pass" if found == "warning" else found


@dataclass
class Check:
    """One finding of the gate: a check kind's verdict on a cell (or on the run), with its figures."""

    name: str
    kind: str  # the registered check's `kind`
    status: Status
    reason: str
    profile: str | None = None
    variant: str | None = None
    cache: str | None = None
    shots: int | None = None
    concurrency: int | None = None
    pass_index: int | None = None
    metric: str | None = None
    value: float | None = None
    threshold: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    lower: float | None = None  # the value's (1 - 2 alpha) interval that inverts the deciding tests (accuracy, a drop)
    upper: float | None = None
    b: int | None = None
    c: int | None = None
    n: int | None = None
    comparison: str | None = None  # the paired comparison an accuracy or throughput check belongs to
    family: str | None = None  # the Holm family its p_adjusted is adjusted within (its check's `family`)

    @property
    def where(self) -> str:
        """The cell a check judges, for people: 'cpu/default cache=on shots=16 conc=4 pass=1' (parts it has)."""
        return cell_label(self.profile, self.variant, self.cache, self.shots, self.concurrency, self.pass_index)

    @property
    def cell(self) -> CellKey | None:
        """The cell it judges; None for a finding on the run or on part of a cell (a profile, a shot count)."""
        named = {k: getattr(self, k) for k in CELL_KEYS}
        return CellKey.from_row(named) if None not in named.values() else None

    def as_dict(self) -> dict[str, Any]:
        return {k: plain(v) for k, v in asdict(self).items()}


def plain(value: Any) -> Any:
    """A JSON-ready scalar: numpy scalars become Python ones, NaN becomes None (JSON has no NaN)."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


@dataclass(frozen=True)
class GateInputs:
    """What every check may read: the run, the baseline run, the policy (its metric resolved), the
    paired comparisons of the run (and against the baseline), the A/A noise by profile."""

    run: Run
    baseline: Run | None
    policy: GatePolicy
    comparisons: list[Comparison]
    noise: dict[str, Noise]
    sequential: bool  # the run stopped its cells sequentially (its decisions replace fixed-n accuracy)


class GateCheck:
    """One kind of gate check; subclass, set the class attributes, and list an instance in `analysis.checks.CHECKS`
    (a plug-in names it in an `evalctl.checks` entry point)."""

    kind: ClassVar[str]  # its name in gate.json and in the policy
    order: ClassVar[int]  # where it runs; a check that can invalidate others (cache-engaged) runs after them
    # The Holm family its p-values are adjusted within (accuracy checks form one, throughput checks another: each
    # family's false-regression rate is bounded by alpha on its own); None for a check that tests nothing.
    family: ClassVar[str | None] = None
    # The model of its own policy section (`checks.<kind>`); None for a built-in reading the policy's top-level fields.
    settings: ClassVar[type[BaseModel] | None] = None

    def results(self, inputs: GateInputs) -> list[Check]:
        """Its findings, from the one `GateInputs` every check gets."""
        raise NotImplementedError

    def revise(self, inputs: GateInputs, earlier: list[Check]) -> list[Check]:
        """The findings before it, which it may change."""
        return earlier

    def settings_of(self, policy: GatePolicy) -> BaseModel | None:
        """This check's policy section, validated (its defaults when the policy has none)."""
        if self.settings is None:
            return None
        return validated(self.settings, policy.checks.get(self.kind, {}), f"gate policy section checks.{self.kind}", "(section)")
