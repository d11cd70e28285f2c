"""Retries are evidence: did more requests fail their first attempt on one side of a comparison? One Holm family.

The client retries 5xx answers, timeouts and dropped connections, and a retried answer is scored like any other, so
a build that fails whenever it hits the prefix cache and serves the retry from scratch looks healthy by its answers.
The records keep every attempt (`records.SampleRecord.first_error_kind`, `attempts`).

Per comparison the requests are paired question by question (`pairing.align`), each side "right" when answered at its
first attempt: b counts requests answered at once by the reference only, c by the candidate only, so the "drop" is the
increase in the first-attempt failure rate, judged by the paired drop rule (`drop_rule.with_drop_decisions`) at
`max_first_attempt_failure_increase`.

Guarantee: the drop rule's, by exact enumeration (`scripts/exact_gate.py --tolerance 0.10 --max-n 1500`, figures in
docs/statistics.md): when every cell's true increase is at most the tolerance, the chance of any false regression in
this family is at most alpha under any dependence between cells (Holm); when a cell's true increase is at least the
tolerance, the chance it passes is at most alpha. Assumption: each question gives one independent (reference,
candidate) pair; failures in bursts (a restarting server, a load spike) break it toward more false regressions, and
the reason names the kinds, so a burst of timeouts reads as what it is.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from evalctl.analysis.checks.accuracy import drop_check, drop_reason
from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.drop_rule import with_drop_decisions
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.analysis.pairing import Comparison, align
from evalctl.cell import CellKey

KIND = "first-attempt"
# The first failure of a retried answer recorded before its kind was (an older run folder): its count is known, its kind not.
UNRECORDED = "kind unrecorded"


def first_failures(side: pd.DataFrame, suffix: str = "") -> pd.Series:
    """Per request, the kind of its first attempt's failure, None where it was answered at once. An error is a failed
    first attempt too (never sent: the server had died; its kind the error's); `attempts > 1` marks a retried answer
    even in a run older than `first_error_kind`."""
    answered_at_once = side[f"error{suffix}"].isna() & (side[f"attempts{suffix}"] == 1)
    kind = side[f"first_error_kind{suffix}"].astype(object).fillna(side[f"error_kind{suffix}"].astype(object)).fillna(UNRECORDED)
    return kind.where(~answered_at_once, None)


def candidate_label(comparison: Comparison, cell: CellKey) -> str:
    """How the candidate side is named beside the comparison's `reference_label` ("cache on" beside "cache off")."""
    if comparison.kind in ("cache", "variant", "profile", "concurrency"):
        return f"{comparison.kind} {cell.as_dict()[comparison.kind]}"
    return f"pass {cell.pass_index}" if comparison.kind == "pass" else "this run"


def first_attempt_table(comparisons: list[Comparison]) -> pd.DataFrame:
    """One row per (comparison, candidate cell): pairs n, b (answered at once by the reference only), c (by the
    candidate only), each side's first-attempt failures, the candidate's answered on a retry, and the kinds of the
    candidate's first failures, most frequent first ("http_5xx 7, timeout 2")."""
    rows = []
    for comp in comparisons:
        for cell, group in CellKey.groups(align(comp)):
            ref, cand = first_failures(group, "_ref").notna(), first_failures(group)
            failed, kinds = cand.notna(), Counter(cand.dropna())
            b, c = int((~ref & failed).sum()), int((ref & ~failed).sum())
            rows.append(
                {
                    "comparison": comp.name,
                    "reference": comp.reference_label,
                    "candidate": candidate_label(comp, cell),
                    **cell.as_dict(),
                    "n": len(group),
                    "b": b,
                    "c": c,
                    "ref_failed": int(ref.sum()),
                    "cand_failed": int(failed.sum()),
                    "cand_retried": int((failed & group["error"].isna()).sum()),
                    "cand_kinds": ", ".join(k if len(kinds) == 1 else f"{k} {m}" for k, m in kinds.most_common()),
                }
            )
    return pd.DataFrame(rows)


def failures_named(row: pd.Series) -> str:
    """'cache on: 9 of 40 requests failed their first attempt (http_5xx) and were answered on a retry; cache off: 0 of 40'."""
    n, failed, retried = int(row["n"]), int(row["cand_failed"]), int(row["cand_retried"])
    told = f"{row['candidate']}: {failed} of {n} requests failed their first attempt"
    if failed:
        answered = "and were answered on a retry" if retried == failed else f"{retried} of them answered on a retry"
        told += f" ({row['cand_kinds']}) {answered}"
    return f"{told}; {row['reference']}: {int(row['ref_failed'])} of {n}"


def first_attempt_checks(comparisons: list[Comparison], policy: GatePolicy) -> list[Check]:
    """One finding per candidate cell of each comparison, each judged (with no failure anywhere it can pass), one family."""
    table = first_attempt_table(comparisons)
    if table.empty:
        return []
    table = with_drop_decisions(table, policy.max_first_attempt_failure_increase, policy.alpha, policy.min_n)
    return [
        drop_check(
            row,
            policy.min_n,
            f"{row['comparison']}: first attempts",
            KIND,
            row["status"],
            drop_reason(row, policy, failures_named(row), "increase", "increase in first-attempt failures"),
            metric="first-attempt failure rate increase",
            comparison=row["comparison"],
        )
        for _, row in table.iterrows()
    ]


class FirstAttempt(GateCheck):
    kind = KIND
    # After cache-engaged, whose revision (inconclusive on a failed cache label) must not hide it: a build whose
    # retries come back cold fails that label, and this finding must stand.
    order = 55
    family = KIND

    def results(self, inputs: GateInputs) -> list[Check]:
        return first_attempt_checks(inputs.comparisons, inputs.policy)


CHECK = FirstAttempt()  # listed in analysis.checks.CHECKS
