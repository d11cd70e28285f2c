"""Which evidence decided the gate's verdict: the deciding checks, their counts, and the requests that show it.

A regression rests on the checks that found one, an inconclusive verdict on those that could not decide, each with
its counts (b, c, n); a pass names none. For a check that pairs answers (an accuracy check, the agreement floor) the
requests shown are the candidate cell's whose response differs from its reference's (same doc_id and prompt_hash),
worst first: the earliest first difference (a response that parts at its first character never saw its context),
then the most cached tokens. Pairs with a request error on either side have no two responses to compare. Positions
are in characters: the records hold each response's text, not its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import pandas as pd

from evalctl.analysis.checks.agreement_floor import KIND as FLOOR_KIND
from evalctl.analysis.checks.base import Check, Status
from evalctl.analysis.pairing import Comparison, align
from evalctl.cell import CellKey
from evalctl.probe.compare import first_divergence
from evalctl.records import CELL_KEYS

# The requests shown per deciding check.
WORST = 3
# Check kinds whose counts pair each candidate answer with a reference answer.
PAIRING_KINDS = ("accuracy", FLOOR_KIND)
PositionUnit = Literal["characters"]


@dataclass(frozen=True)
class PartedRequest:
    """A candidate request whose response differs from its reference's, and where they part."""

    doc_id: int
    prompt_tokens: int | None
    cached_tokens: int | None
    first_difference: int  # the first position (`Evidence.position_unit`) where the two responses differ
    turn_kind: str | None = None  # a conversation workload's (`tasks.conversation`)


@dataclass(frozen=True)
class DecidingCheck:
    """One check the verdict rests on: what it judged, where, its counts, the worst requests of its cell."""

    name: str
    kind: str
    where: str  # the cell, for people ("" for a finding on the run)
    comparison: str | None = None
    b: int | None = None
    c: int | None = None
    n: int | None = None
    worst: list[PartedRequest] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    """What decided a verdict: its deciding checks in the gate's order."""

    verdict: Status
    checks: list[DecidingCheck] = field(default_factory=list)
    position_unit: PositionUnit = "characters"


def _int(value: object) -> int | None:
    return None if pd.isna(value) else int(value)


def parted_requests(comparison: Comparison, cell: CellKey) -> list[PartedRequest]:
    """The `WORST` requests of the candidate `cell` whose response differs from its reference's, worst first (module docstring)."""
    candidate = comparison.candidate
    in_cell = (candidate[CELL_KEYS] == pd.Series(cell.as_dict())).all(axis=1)
    pairs = align(replace(comparison, candidate=candidate[in_cell]))
    pairs = pairs[pairs["error_ref"].isna() & pairs["error"].isna() & pairs["response_ref"].notna() & pairs["response"].notna()]
    parted = pairs.assign(first_difference=[first_divergence(r, c) for r, c in zip(pairs["response_ref"], pairs["response"])])
    parted = parted[parted["first_difference"].notna()]
    ranked = parted.sort_values(["first_difference", "cached_tokens", "doc_id"], ascending=[True, False, True], na_position="last")
    return [
        PartedRequest(
            doc_id=int(row["doc_id"]),
            prompt_tokens=_int(row["prompt_tokens"]),
            cached_tokens=_int(row["cached_tokens"]),
            first_difference=int(row["first_difference"]),
            turn_kind=row["turn_kind"] if "turn_kind" in row and pd.notna(row["turn_kind"]) else None,
        )
        for _, row in ranked.head(WORST).iterrows()
    ]


def deciding_evidence(verdict: Status, checks: list[Check], comparisons: list[Comparison]) -> Evidence:
    """The checks `verdict` rests on (none for a pass), with their counts and, for a check that pairs
    answers, its candidate cell's worst requests against the reference of its comparison (`comparisons`:
    the gate's, by name; a floor check's is the cache comparison it shares the name of)."""
    by_name = {comparison.name: comparison for comparison in comparisons}
    deciding = []
    for check in [c for c in checks if verdict != "pass" and c.status == verdict]:
        comparison, cell = by_name.get(check.comparison or ""), check.cell
        worst = parted_requests(comparison, cell) if check.kind in PAIRING_KINDS and comparison and cell else []
        deciding.append(DecidingCheck(check.name, check.kind, check.where, check.comparison, check.b, check.c, check.n, worst))
    return Evidence(verdict, deciding)
