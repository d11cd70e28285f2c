"""gate.json: the gate's result as one typed, versioned document, written and read by `GateDocument`.

Every reader of a stored verdict (the HTML report, the dashboard and its sign-off pages, the
bisect's `--from-run`, `sweep --executor slurm --wait`) goes through `read_gate`, so a field is
renamed in one place and a malformed file fails the same way everywhere (`GateFileError`, exit 4).

Versions: `schema_version` 1 is this layout. A file without the field was written before it
existed, with the same fields, and reads as 1. `evidence` (what decided the verdict,
`analysis.evidence`) came later within version 1: a file without it reads with none. A file from a newer evalctl is refused rather
than half-read: its fields may mean something this version cannot tell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalctl.analysis.checks.base import Check, Status, plain
from evalctl.analysis.evidence import Evidence
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.errors import VERDICT_EXIT, GateFileError

GATE_FILE = "gate.json"
GATE_SCHEMA_VERSION = 1


class GateDocument(BaseModel):
    """The stored gate result: verdict and exit status, the policy it was judged by, every check, the cliffs,
    and the evidence the verdict rests on."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: int = Field(GATE_SCHEMA_VERSION, description="Layout version; see the module docstring.")
    verdict: Status
    exit_code: int
    policy: GatePolicy
    run: str
    baseline: str | None = None
    checks: list[Check] = []
    cliffs: list[dict[str, Any]] = []
    evidence: Evidence | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if version > GATE_SCHEMA_VERSION:
            raise ValueError(f"schema_version {version} is newer than this evalctl reads ({GATE_SCHEMA_VERSION}): upgrade evalctl")
        return version

    @field_validator("policy", mode="before")
    @classmethod
    def _stored_policy(cls, policy: Any) -> Any:
        """A stored policy keeps the fields this version knows: one an older evalctl wrote and has
        since dropped does not make its verdict unreadable (a policy file is still strict)."""
        return {k: v for k, v in policy.items() if k in GatePolicy.model_fields} if isinstance(policy, dict) else policy

    @classmethod
    def of(cls, result: Any) -> GateDocument:
        """The document of a `gate.GateResult` (typed as Any: gate.py imports this module)."""
        cliffs = [{k: plain(v) for k, v in row.items()} for row in result.cliffs.to_dict("records")]
        checks = [Check(**c.as_dict()) for c in result.checks]  # numpy scalars and NaN made plain
        return cls(verdict=result.verdict, exit_code=int(VERDICT_EXIT[result.verdict]), policy=result.policy,
                   run=result.run, baseline=result.baseline, checks=checks, cliffs=cliffs, evidence=result.evidence)  # fmt: skip

    def check_rows(self) -> list[dict[str, Any]]:
        """The checks as plain rows, for tables."""
        return [c.as_dict() for c in self.checks]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def read_gate(run_dir: Path) -> GateDocument | None:
    """The gate document stored in a run folder; None when the run was never gated; GateFileError naming the first problem."""
    path = run_dir / GATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GateFileError(f"{path} is unreadable: {exc}") from None
    except ValueError as exc:
        raise GateFileError(f"{path} is not JSON: {exc}") from None
    try:
        return GateDocument.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        place = ".".join(str(p) for p in first["loc"]) or "document"
        raise GateFileError(f"{path} is not a gate document: {place}: {first['msg']}") from None
