"""The gate policy: what the gate tolerates, read from YAML (configs/gate/) or the built-in default.

Built-in checks read the policy's top-level fields; a check added as a plug-in reads its own
section, `checks.<kind>`, validated by the check's `settings` model (`analysis.checks`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalctl.config_files import policy_file, read_yaml
from evalctl.errors import BadInput

if TYPE_CHECKING:
    from evalctl.runs import Run


class FloorSource(str, Enum):
    """Where the agreement floor is measured."""

    aa = "aa"  # the run's A/A arm: each server's cache-off reference cell run again, cold (`noise: true`)


class GatePolicy(BaseModel):
    """What the gate tolerates. Rates and drops are fractions (0.03 = 3 points)."""

    model_config = ConfigDict(extra="forbid")

    metric: str | dict[str, str] | None = Field(
        None,
        description="The task's metric judged, as the task names it (gsm8k: strict or flexible), or one per task name"
        " (a task not named: its first), or agreement (each answer vs the same server's cache-off one: evalctl.agreement);"
        " default: the task's first.",
    )
    max_accuracy_drop: float = Field(0.03, ge=0, lt=1, description="Largest tolerated paired accuracy drop, absolute.")
    alpha: float = Field(
        0.05, gt=0, lt=0.5, description="Largest chance of a false regression (Holm over the accuracy checks) and of a false pass."
    )
    min_n: int = Field(30, ge=1, description="Fewer question pairs (or timed requests) per cell than this: inconclusive.")
    max_invalid_rate: float = Field(0.10, ge=0, le=1, description="Largest share of scored answers with no extractable answer.")
    max_error_rate: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Largest share of requests that got no answer (HTTP errors, timeouts); each also counts as wrong when paired.",
    )
    max_throughput_drop: float | None = Field(
        0.20, ge=0, lt=1, description="Largest tolerated per-request slowdown (fraction of the reference's throughput); null disables."
    )
    max_host_cpu_loss: float | None = Field(
        0.20,
        ge=0,
        lt=1,
        description="Largest relative loss, between a throughput check's two cells, in the share of the machine's CPUs other"
        " processes left free (recorded per cell) at which it still concludes; beyond it, what the load could explain is"
        " inconclusive. 0.20: load that takes a fifth of the free CPU could explain a slowdown at max_throughput_drop. null: never.",
    )
    max_first_attempt_failure_increase: float = Field(
        0.10,
        ge=0,
        lt=1,
        description="Largest tolerated paired increase in the share of requests not answered at their first attempt (a retried"
        " answer, or none), candidate vs reference (analysis.checks.first_attempt). 0.10: the smallest round value at which"
        " min_n (30) pairs with no failed first attempt pass.",
    )
    agreement_floor: FloorSource | None = Field(
        None,
        description="Judge each cache-on cell's disagreement with its cache-off answers against a measured floor: aa, the A/A arm's"
        " cold-vs-cold disagreement on the same questions (needs noise: true; analysis.floor); null: off.",
    )
    floor_margin: float = Field(
        0.10, ge=0, lt=1, description="Largest tolerated excess of warm-vs-cold disagreement over the floor (agreement_floor), absolute."
    )
    checks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per check kind, that check's own settings (checks a plug-in adds); see analysis.checks."
    )

    def for_run(self, run: Run) -> GatePolicy:
        """This policy with its metric resolved to the one `run` is judged by (per task names, for a policy shared by tasks
        whose metrics differ, cpu-smoke: a task not named is judged by its first); one its task does not score is a BadInput."""
        wanted = self.metric.get(run.task) if isinstance(self.metric, dict) else self.metric
        return self.model_copy(update={"metric": run.metric(wanted)})


def load_policy(name: str | Path | None = None) -> GatePolicy:
    """The policy `name` means (a policy name or a file, `config_files.policy_file`), or the built-in
    default (the same as the packaged gate/default.yaml)."""
    if name is None:
        return GatePolicy()
    path = policy_file(name)
    return validated(GatePolicy, read_yaml(path, "gate policy"), f"gate policy {path}")


Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], data: Any, what: str, top: str = "(top level)") -> Model:
    """`data` as a `model`, or BadInput naming `what` and each field at fault (`top`: the whole of it)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or top}: {e['msg']}" for e in exc.errors())
        raise BadInput(f"invalid {what}: {where}") from None
