"""bisect.json: everything a bisect has decided, written atomically after every change, so `--resume` goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from evalctl.bisect.builds import Build
from evalctl.bisect.search import Find, Verdict
from evalctl.errors import StateError
from evalctl.fsio import write_atomic

STATE_FILE = "bisect.json"


class CellSpec(BaseModel):
    """The regressed cells a step runs: one profile and variant, these shot counts and cache modes."""

    profile: str
    variant: str
    shots: list[int]
    cache: list[str]


class Step(BaseModel):
    """One launch of one build: its run folder, and the verdict once finished."""

    number: int  # 0 = the good build's reference run
    build: int  # index in commit order
    root: Path  # results root holding the step's one run folder
    launched: bool = True  # False: the build failed, nothing was launched
    run_dir: Path | None = None
    verdict: Verdict | None = None  # None while running
    reason: str = ""
    answered: int = 0
    planned: int = 0
    accuracy: float | None = None  # the step's, on the questions it answered
    reference_accuracy: float | None = None  # the reference's on the same questions


class Settings(BaseModel):
    """What the bisect was started with; a resume keeps all of it."""

    from_run: Path
    repo: Path | None = None
    build_command: str | None = None
    cells: CellSpec
    step_alpha: float
    target: float
    max_launches: int
    executor: Literal["local", "slurm"] = "local"
    find: Find = Find.regression  # fix: builds are held newest first (search.search_order)


class BisectState(BaseModel):
    settings: Settings
    builds: list[Build]
    steps: list[Step] = Field(default_factory=list)
    step_tolerance: float | None = None  # set once the bad endpoint reproduced (search.step_tolerance)
    outcome: Literal["running", "culprit", "inconclusive", "not-reproduced"] = "running"
    culprit: list[int] = Field(default_factory=list)  # the build(s) named: the first bad one, or with --find fix the first good one
    probability: float | None = None
    message: str = ""

    @property
    def launches(self) -> int:
        return sum(s.launched for s in self.steps)

    def save(self, folder: Path) -> None:
        write_atomic(folder / STATE_FILE, self.model_dump_json(indent=2))


def load_state(folder: Path) -> BisectState:
    path = folder / STATE_FILE
    try:
        return BisectState.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise StateError(f"cannot resume {folder}: no {STATE_FILE} there (not a bisect folder)") from None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror}") from None
    except ValidationError as exc:
        raise StateError(f"{path} is corrupt or from another version: {exc.errors()[0]['msg']}") from None
