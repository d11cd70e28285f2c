"""Leads: returns a hunt found beyond the healthy spread on a build it could not yet call a regression.

Rosenbaum's count (`analysis.divergence`) needs several returns beyond the spread on one build (its p-value for k of
n returns against m healthy pairs is at least C(n, k) / C(n + m, k): with 16 returns and 32 pairs, one return gives
0.33), while a bug whose trigger is one shape of history fires on few of a survey's returns and on most copies of
that shape. So a lead is followed (`hunt.follow`, `evalctl sweep --follow RUN`): copies of its conversation, the same
shape with other questions, judged on their own (docs/conversations.md).

The follow-up is a fresh experiment, so its divergence rung's guarantee (false regression <= alpha under
exchangeability) holds as stated given the shape followed; a job that acts on either run's regression has a
false-alarm rate of at most the sum of the two alphas. Where a shape's healthy returns drift more than extensions do,
a follow-up concentrates that, which the margin (0.1 nats) must cover, as in the survey.
"""

from __future__ import annotations

import pandas as pd

from evalctl.analysis.divergence import Settings, decided, rungs
from evalctl.cell import CellKey
from evalctl.records import EXTENDING
from evalctl.schema import CacheMode, Lead

# The worst returns followed per build: each costs `hunt.copies` conversations up to that return.
MOST = 2


def leads(samples: pd.DataFrame, settings: Settings, alpha: float) -> dict[str, list[Lead]]:
    """Per build whose divergence rung is not already a regression, its returns beyond the spread (the `MOST` worst), each
    named by its conversation and which of that conversation's returns it is."""
    rows = {cell: row for cell, (row, _) in rungs(samples, settings).items()}
    warm = dict(CellKey.groups(samples[samples["cache"] == CacheMode.on.value]))
    found: dict[str, list[tuple[float, Lead]]] = {}
    for cell, (status, _) in decided(rows, alpha).items():
        if status == "regression" or rows[cell].worst.empty:
            continue
        returns = warm[cell][~warm[cell]["turn_kind"].isin(EXTENDING)].sort_values("doc_id")
        which = {doc: i for _, group in returns.groupby("conversation") for i, doc in enumerate(group["doc_id"])}
        conversation = dict(zip(returns["doc_id"], returns["conversation"]))
        worst = rows[cell].worst
        found.setdefault(cell.variant, []).extend(
            (float(div), Lead(conversation=int(conversation[d]), ret=which[d])) for d, div in zip(worst["doc_id"], worst["divergence"])
        )
    return {variant: [lead for _, lead in sorted(mine, key=lambda f: -f[0])[:MOST]] for variant, mine in sorted(found.items())}
