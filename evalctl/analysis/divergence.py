"""The logprob rungs of the oracle ladder: a warm request against its cold twin, token by token.

The same bytes sent warm and cold should generate the same tokens with the same logprobs; a
wrongly restored cache state shows first in the logprobs (llama.cpp #24411: 0.35-0.64 nats
against a healthy drift of about 0.07), long before it flips an answer. Per pair
(`compare_tokens`, over the positions `probe.compare` picks: up to the first divergent token):

- exact: identical tokens, logprobs and top-k alternatives at every position;
- first divergence: the first position whose tokens differ (None: none);
- divergence (nats): the largest change over those positions in the logprob of either side's
  chosen token (one the other side did not list counts at most its least listed logprob: a
  lower bound on the change).

The healthy spread comes from the same run: the *reference* is the warm requests that only
extend what the previous request cached (a conversation's `extend` turns), the *judged* ones
the returns (rewinds and branches). The A/A arm's cold-vs-cold pairs are no reference: two cold
paths follow a law of their own (bitwise zero on llama.cpp), and would make the p-value too
small. A judged pair counts only when its cache engaged (cached tokens on the warm side > 0) and
it recomputed no more of its prompt than some reference pair did: a return served from an early
checkpoint recomputes most of its prompt in other micro-batches, a drift no extension shows
(`scripts/split_screen.py`), so exchangeability is assumed only within the reference's support,
and the reason names the returns left out. A rung passes only with at least `min_positions`
positions compared over its judged pairs; a difference found needs no more. A run with no
judged extension gets neither rung: the answer rung judges it alone. Measurements:
docs/conversations.md.

**Exact rung.** Where the reference shows the engine deterministic (at least `min_reference`
reference pairs, every one exact), any judged pair not exact is a regression. It needs no error
rate: where every reference pair is bitwise identical a healthy judged pair is too; where they
are not all exact the rung does not apply.

**Divergence rung** (Rosenbaum 1954's exceedance statistic). Of m reference and n judged
divergences, K counts the judged ones above the reference's largest by more than `margin` nats.
When all N = n + m values are exchangeable (no bug) the k largest are all judged with
probability C(n, k) / C(N, k) = prod_{i<k} (n - i) / (N - i), the p-value of K >= k. Regression
when that p, Holm-adjusted over a build's cells, is <= alpha; pass when K = 0; inconclusive
otherwise. Guarantee: false regression <= alpha for any continuous law of the divergences (exact,
no asymptotics); ties at the reference's maximum and the margin only lower K, so the rate stays
below alpha with them. `scripts/divergence_false_alarms.py` measures the rate by simulation and
fails above alpha.

Assumptions: under no bug the judged divergences are exchangeable with the reference's; returns
that restore saved state may drift a little more than extensions on a healthy build, which the
margin (default 0.1 nats, above llama.cpp's 0.07) covers. Requests of one conversation share
their state, so they are not independent; the p-value needs exchangeability, not independence.

Reference: S. Rosenbaum (1954), "Tables for a nonparametric test of location", Ann. Math.
Statist. 25(1):146-150.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from evalctl.analysis.multiple import holm
from evalctl.analysis.pairing import Comparison, align
from evalctl.cell import CellKey
from evalctl.client import TokenLogprob
from evalctl.probe.compare import compare
from evalctl.records import CELL_KEYS, EXTENDING, read_logprobs
from evalctl.schema import CacheMode


@dataclass(frozen=True)
class TokenPair:
    """How a warm generation's tokens and logprobs depart from its cold twin's."""

    exact: bool  # tokens, logprobs and top-k alternatives identical at every position
    first_divergence: int | None  # the first position whose tokens differ (None: the same tokens)
    positions: int  # positions compared: up to and including the first divergence
    divergence: float | None  # nats: the largest change in a chosen token's logprob (None: no logprobs)


# A pair's request (turn, turn_kind: a conversation's) and how its tokens depart.
PAIR_COLUMNS = [*CELL_KEYS, "doc_id", "turn", "turn_kind", "prompt_tokens", "cached_tokens", *(f.name for f in fields(TokenPair))]


def _logprob_of(token: str, at: TokenLogprob) -> float | None:
    """`at`'s logprob of `token`: its own if chosen, else listed, else at most its least listed one."""
    if at.token == token and at.logprob is not None:
        return at.logprob
    if token in at.top:
        return at.top[token]
    return min(at.top.values()) if at.top else None


def _change(a: TokenLogprob, b: TokenLogprob) -> float | None:
    """The larger change, from `a` to `b`, of either side's chosen token's logprob (a lower bound when unlisted)."""
    changes = []
    for chosen, other in ((a, b), (b, a)):
        mine, theirs = _logprob_of(chosen.token, chosen), _logprob_of(chosen.token, other)
        if mine is None or theirs is None:
            return None
        listed = other.token == chosen.token or chosen.token in other.top
        changes.append(abs(mine - theirs) if listed else max(0.0, mine - theirs))
    return max(changes)


def compare_tokens(warm: Sequence[TokenLogprob], cold: Sequence[TokenLogprob]) -> TokenPair:
    """`warm` against `cold`, position by position (`probe.compare` picks the positions)."""
    tokens = compare([t.token for t in warm], [t.token for t in cold])
    exact = tokens.exact and all(w.logprob == c.logprob and w.top == c.top for w, c in zip(warm, cold))
    changes = [_change(w, c) for w, c in zip(warm[: tokens.aligned], cold[: tokens.aligned])]
    known = [x for x in changes if x is not None]
    return TokenPair(exact, tokens.first_divergence, tokens.aligned, max(known) if known else (0.0 if exact else None))


def cell_pairs(samples: pd.DataFrame) -> list[tuple[CellKey, pd.DataFrame]]:
    """Per cache-on cell with logprobs: one row per question answered on both sides with logprobs, the warm request
    and its usage, and how its tokens depart from its cold twin's (`compare_tokens`)."""
    if "logprobs" not in samples or not samples["logprobs"].notna().any():
        return []
    cold, warm = (samples[samples["cache"] == mode.value] for mode in (CacheMode.off, CacheMode.on))
    pairs = align(Comparison("cache", "warm vs cold", cold, warm, tuple(CellKey.columns("cache")), "cache off"))
    pairs = pairs[pairs["error"].isna() & pairs["error_ref"].isna() & pairs["logprobs"].notna() & pairs["logprobs_ref"].notna()]
    tokens = [compare_tokens(read_logprobs(w) or (), read_logprobs(c) or ()) for w, c in zip(pairs["logprobs"], pairs["logprobs_ref"])]
    rows = [{**{k: row.get(k) for k in PAIR_COLUMNS}, **asdict(pair)} for (_, row), pair in zip(pairs.iterrows(), tokens)]
    return list(CellKey.groups(pd.DataFrame(rows, columns=PAIR_COLUMNS)))


def exceedance_p(k: int, n: int, m: int) -> float:
    """P(the k largest of n + m exchangeable values all fall among the n): C(n, k) / C(n + m, k) (Rosenbaum 1954)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return math.prod((n - i) / (n + m - i) for i in range(k))


class Settings(BaseModel):
    """What both logprob rungs read (a gate policy's `checks.exact` and `checks.divergence` sections)."""

    model_config = ConfigDict(extra="forbid")

    margin: float = Field(0.1, ge=0, description="Nats above the healthy pairs' largest divergence a return must reach to count.")
    min_reference: int = Field(10, ge=1, description="Healthy pairs (engaged extensions) a cell needs before a rung decides.")
    min_positions: int = Field(20, ge=1, description="Token positions compared over a cell's judged returns before a rung decides.")


def exceedances(judged: np.ndarray, reference: np.ndarray, margin: float) -> tuple[int, float, float]:
    """(K, the threshold, its p): the judged values above the reference's largest + `margin` (module docstring)."""
    threshold = float(reference.max()) + margin
    count = int((judged > threshold).sum())
    return count, threshold, exceedance_p(count, len(judged), len(reference))


@dataclass(frozen=True)
class RungRow:
    """One rung's finding on one cache-on cell."""

    status: str  # pass | regression | inconclusive
    reason: str
    judged: int  # engaged judged pairs
    exceeding: int  # exact rung: pairs not exact; divergence rung: K
    threshold: float | None
    p_value: float | None
    worst: pd.DataFrame  # the judged pairs that decided, worst first


def recomputed(pairs: pd.DataFrame) -> pd.Series:
    """Prompt tokens the warm side computed rather than took from the cache."""
    return pairs["prompt_tokens"] - pairs["cached_tokens"].fillna(0)


def split(pairs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(judged, reference, unsupported) of one cache-on cell's warm-vs-cold `pairs`: the engaged returns that recomputed
    no more of their prompt than some reference pair did, the engaged extensions (`EXTENDING`) with a divergence, and
    the engaged returns left out for recomputing more (module docstring: outside the reference's support)."""
    engaged = pairs["cached_tokens"].fillna(0) > 0
    extending = pairs["turn_kind"].isin(EXTENDING)
    reference = pairs[extending & engaged & pairs["divergence"].notna()]
    returns = pairs[~extending & engaged]
    supported = recomputed(returns) <= (recomputed(reference).max() if len(reference) else -1)
    return returns[supported], reference, returns[~supported]


def _left_out(unsupported: pd.DataFrame, reference: pd.DataFrame) -> str:
    """A reason's tail naming the returns left out for recomputing more of their prompt than any reference pair."""
    if unsupported.empty:
        return ""
    return (
        f"; {len(unsupported)} engaged return{'s' if len(unsupported) > 1 else ''} left out: each recomputed more of its prompt (up to"
        f" {int(recomputed(unsupported).max())} tokens) than any healthy pair ({int(recomputed(reference).max())}), so its drift is"
        " another prefill split's, with no reference"
    )


def _guard(judged: pd.DataFrame, reference: pd.DataFrame, unsupported: pd.DataFrame, settings: Settings, found: bool) -> RungRow | None:
    """The inconclusive finding of a cell too thin to judge; None when a rung may decide (`found`: a judged pair differs
    beyond what the rung allows, which needs no minimum of positions compared)."""
    positions = int(judged["positions"].sum())
    if judged.empty and len(unsupported):
        why = "no engaged return recomputed as little of its prompt as a healthy pair did"
    elif judged.empty:
        why = "no judged request with cached tokens reported on the warm side: the cache never engaged on a return"
    elif len(reference) < settings.min_reference:
        why = (
            f"{len(reference)} healthy pairs (engaged extensions), fewer than {settings.min_reference}: no healthy spread to judge against"
        )
    elif positions < settings.min_positions and not found:
        why = f"{positions} token positions compared over {len(judged)} judged pairs, fewer than {settings.min_positions}"
    else:
        return None
    return RungRow("inconclusive", why + _left_out(unsupported, reference), len(judged), 0, None, None, judged.head(0))


def exact_rung(pairs: pd.DataFrame, settings: Settings) -> RungRow | None:
    """The exact rung on one cell (None where it does not apply: the reference shows the engine not deterministic,
    or the run collected no reference at all)."""
    judged, reference, unsupported = split(pairs)
    if reference.empty or (len(reference) >= settings.min_reference and not reference["exact"].all()):
        return None
    parted = judged[~judged["exact"].astype(bool)]
    if undecided := _guard(judged, reference, unsupported, settings, found=not parted.empty):
        return undecided
    worst = parted.sort_values(["first_divergence", "divergence"], ascending=[True, False], na_position="last")
    status = "regression" if len(parted) else "pass"
    reason = (
        f"{len(parted)} of {len(judged)} engaged returns differ from their cold twins, where all {len(reference)} reference pairs"
        " (extensions) are bitwise identical" + _left_out(unsupported, reference)
    )
    return RungRow(status, reason, len(judged), len(parted), 0.0, None, worst)


def divergence_rung(pairs: pd.DataFrame, settings: Settings) -> RungRow | None:
    """The divergence rung on one cell (its p-value unadjusted: `decided` adjusts a build's cells); None where
    the run collected no reference at all (no judged extension): the answer rung judges such a run alone,
    where an inconclusive here would make every such run inconclusive by construction."""
    judged, reference, unsupported = split(pairs)
    if reference.empty:
        return None
    judged = judged[judged["divergence"].notna()]
    count, threshold, p = exceedances(judged["divergence"].to_numpy(float), reference["divergence"].to_numpy(float), settings.margin)
    if undecided := _guard(judged, reference, unsupported, settings, found=count > 0):
        return undecided
    beyond = judged[judged["divergence"] > threshold].sort_values("divergence", ascending=False)
    reason = (
        f"{count} of {len(judged)} engaged returns moved a token's logprob more than {threshold:.3f} nats (the largest of"
        f" {len(reference)} healthy pairs + {settings.margin} margin); p {p:.3g} that exchangeable healthy pairs put them on top"
        + _left_out(unsupported, reference)
    )
    return RungRow("pass" if beyond.empty else "inconclusive", reason, len(judged), count, threshold, p, beyond)


def rungs(samples: pd.DataFrame, settings: Settings) -> dict[CellKey, tuple[RungRow, pd.DataFrame]]:
    """Per cache-on cell the divergence rung applies to, builds in order: its finding and its warm-vs-cold pairs."""
    found = {cell: (row, pairs) for cell, pairs in cell_pairs(samples) if (row := divergence_rung(pairs, settings)) is not None}
    return {cell: found[cell] for cell in sorted(found, key=lambda cell: cell.variant)}


def decided(rows: Mapping[CellKey, RungRow], alpha: float) -> dict[CellKey, tuple[str, float | None]]:
    """(status, Holm-adjusted p) per cell in `rows`' order, each build's cells one Holm family: regression where the
    adjusted p is <= alpha."""
    tested = [cell for cell, row in rows.items() if row.p_value is not None]
    adjusted = {}
    for variant in {cell.variant for cell in tested}:
        family = [cell for cell in tested if cell.variant == variant]
        adjusted.update(zip(family, holm([rows[cell].p_value for cell in family])))
    out = {}
    for cell, row in rows.items():
        p = adjusted.get(cell)
        out[cell] = ("regression" if p is not None and p <= alpha and row.exceeding else row.status, None if p is None else float(p))
    return out


def near_ties(pairs: pd.DataFrame, threshold: float, cleared: str = "the divergence rung passed this cell") -> str | None:
    """Why a cell's moved answers are a healthy warm path's near ties, or None when they may not be: every request whose
    tokens moved (judged or reference) parted with logprobs that changed no more than `threshold` (the divergence rung's
    healthy largest + margin), where the rung `cleared` the cell."""
    moved = pairs[pairs["first_divergence"].notna()]
    if moved.empty or moved["divergence"].isna().any() or (moved["divergence"] > threshold).any():
        return None
    return (
        f"{cleared}, and each of the {len(moved)} requests whose tokens moved parted within the"
        f" healthy spread (largest {moved['divergence'].max():.3f} <= {threshold:.3f} nats): near ties, not a lost state"
    )


def worst_requests(worst: pd.DataFrame) -> str:
    """A reason's tail naming up to three deciding requests for people ("; worst: ...", "" for none): where warm and
    cold part, and what the cache held there."""

    def one(row: pd.Series) -> str:
        kind = f"{row['turn_kind']} " if isinstance(row["turn_kind"], str) else ""
        parts = "same tokens" if pd.isna(row["first_divergence"]) else f"parts at token {int(row['first_divergence'])}"
        cached = f"{_count(row['cached_tokens'])} of {_count(row['prompt_tokens'])} prompt tokens cached"
        moved = "" if pd.isna(row["divergence"]) else f", {row['divergence']:.3f} nats"
        return f"doc {int(row['doc_id'])} ({kind}turn {_count(row['turn'])}): {parts}, {cached}{moved}"

    return "; worst: " + "; ".join(one(row) for _, row in worst.head(3).iterrows()) if len(worst) else ""


def _count(value: object) -> str:
    return "?" if pd.isna(value) else str(int(value))
