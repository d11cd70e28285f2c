"""Did the prefix cache do what each cell's label says? The `cache-engaged` gate check.

A "cache on" cell whose cache never engaged (a server started with it off, a proxy that strips it,
blocks larger than the shared prefix) makes every comparison resting on it compare cache off with
cache off. The manifest records each cell's shared few-shot prefix (`servers[].cells[].shared_prefix_chars`):

- expected cached tokens per request: the prefix's tokens as the server's tokenizer counted them
  (`shared_prefix_tokens`), else its prompt tokens times the prefix's share of its characters;
- reported: the records' `cached_tokens`, else the delta of the engine's `/metrics` counter over the cell;
- a cache-on cell is engaged when reported >= `MIN_ENGAGED` x expected (room for block granularity
  and the first cold requests); a cache-off cell may report at most `MAX_OFF` x expected.

A cell that fails is inconclusive, saying why (cold retries first, else no engagement, else too
few tokens), and so is every accuracy and throughput check of a comparison with that cell on
either side (`rests_on_failed`): never a pass.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.pairing import Comparison, match
from evalctl.cell import CellKey
from evalctl.manifest import CACHED_TOKENS, CellEntry, Manifest
from evalctl.records import CELL_KEYS
from evalctl.schema import CacheMode

MIN_ENGAGED = 0.5
MAX_OFF = 0.05
ENGAGEMENT_COLUMNS = [*CELL_KEYS, "expected_tokens", "reported_tokens", "source", "ok", "reason"]


def _metrics_delta(entry: CellEntry) -> float | None:
    # Every engine's adapter records its cached-prompt-token counter under CACHED_TOKENS (servers.base).
    before, after = entry.metrics_before, entry.metrics_after
    if CACHED_TOKENS in before and CACHED_TOKENS in after:
        return float(after[CACHED_TOKENS]) - float(before[CACHED_TOKENS])
    return None


def _short_of_engaged(answered: pd.DataFrame, reported: float) -> str:
    """Why a cache-on cell reported too few cached tokens. Retries are evidence: a warm request whose first attempt
    failed and whose retry came back cold is a server that failed on its cache, not a cache that never engaged,
    so that is named first; "did not engage" only when no attempt was served with cached tokens."""
    cold_retries = int(((answered["attempts"] > 1) & (answered["cached_tokens"] == 0)).sum())
    if cold_retries:
        return f"{cold_retries} warm requests failed their first attempt and were answered by a retry with no cached tokens"
    return "cache did not engage" if not reported else "cache engaged on too few tokens"


def engagement_table(samples: pd.DataFrame, manifest: Manifest) -> pd.DataFrame:
    """One row per cell with a shared prefix: expected and reported cached tokens, and whether the cell's label holds."""
    entries = {server.cell_of(entry): entry for server in manifest.servers for entry in server.cells}  # the last start's log
    rows = []
    for key, group in CellKey.groups(samples):
        shared = entries[key].shared_prefix_chars if key in entries else None
        ok_rows = group[group["error"].isna() & group["prompt_tokens"].notna() & (group["prompt_chars"] > 0)]
        if not shared or ok_rows.empty:
            continue  # nothing the plan expects the cache to hold
        counted = entries[key].shared_prefix_tokens
        # The server's own count of the prefix where recorded: a prompt's opening (instructions) and its body
        # (records, exemplars) differ in tokens per character, so a share of the request's tokens misjudges a short one.
        estimated = ok_rows["prompt_tokens"].astype(float) * shared / ok_rows["prompt_chars"]
        expected = float(counted * len(ok_rows)) if counted else float(estimated.sum())
        cached = ok_rows["cached_tokens"].dropna()
        if len(cached):
            reported, source = float(cached.sum()), "records"
        else:
            reported, source = _metrics_delta(entries[key]), "/metrics"
        if reported is None:
            ok, reason = False, "cannot tell: the engine reported no cached tokens, per request or in /metrics"
        else:
            share = reported / expected if expected else 0.0
            figures = (
                f"{reported:.0f} cached tokens ({source}) of {expected:.0f} expected from the shared {shared}-char prefix ({share:.0%})"
            )
            if key.cache is CacheMode.on:
                ok = share >= MIN_ENGAGED
                why = "" if ok else _short_of_engaged(ok_rows, reported)
                reason = f"{figures}; engaged needs >= {MIN_ENGAGED:.0%}" if ok else f"{why}: {figures}, < {MIN_ENGAGED:.0%}"
            else:
                ok = share <= MAX_OFF
                reason = (
                    f"{figures}; off allows <= {MAX_OFF:.0%}" if ok else f"cache-off cell served from a cache: {figures}, > {MAX_OFF:.0%}"
                )
        rows.append(dict(key.as_dict(), expected_tokens=expected, reported_tokens=reported, source=source, ok=ok, reason=reason))
    return pd.DataFrame(rows, columns=ENGAGEMENT_COLUMNS)


def rests_on_failed(comparisons: list[Comparison], table: pd.DataFrame) -> dict[tuple[str, CellKey], str]:
    """(comparison name, candidate cell) -> why, for every comparison cell with a failed cell on either side."""
    failed = table.loc[~table["ok"].astype(bool), [*CELL_KEYS, "reason"]]
    out: dict[tuple[str, CellKey], str] = {}
    if failed.empty:
        return out
    for comp in comparisons:
        sides = {
            side: getattr(comp, side)[CELL_KEYS].drop_duplicates().merge(failed, on=CELL_KEYS, how="left")
            for side in ("reference", "candidate")
        }
        matched = match(replace(comp, **sides))
        for _, row in matched.iterrows():
            why = [r for r in (row["reason"], row["reason_ref"]) if isinstance(r, str)]
            if why:
                out[(comp.name, CellKey.from_row(row))] = "; ".join(why)
    return out


class CacheEngaged(GateCheck):
    kind = "cache-engaged"
    order = 50

    def results(self, inputs: GateInputs) -> list[Check]:
        """One check per cell with a shared prefix."""
        return [
            Check(
                f"cache {row['cache']} as labelled",
                "cache-engaged",
                "pass" if row["ok"] else "inconclusive",
                row["reason"],
                **CellKey.from_row(row).as_dict(),
                metric="cached / expected tokens",
                value=row["reported_tokens"] / row["expected_tokens"]
                if row["reported_tokens"] is not None and row["expected_tokens"]
                else None,
            )
            for _, row in engagement_table(inputs.run.samples, inputs.run.manifest).iterrows()
        ]

    def revise(self, inputs: GateInputs, earlier: list[Check]) -> list[Check]:
        """The comparisons resting on a cell that failed its cache label: inconclusive, never a pass."""
        failed = rests_on_failed(inputs.comparisons, engagement_table(inputs.run.samples, inputs.run.manifest))
        out = []
        for check in earlier:
            why = failed.get((check.comparison, check.cell)) if check.comparison else None
            if why:  # named even on a check already inconclusive: it is the reason nothing could be told
                was = f"was {check.status}: " if check.status != "inconclusive" else ""
                reason = f"rests on a cell whose cache label failed ({why}); {was}{check.reason}"
                check = replace(check, status="inconclusive", reason=reason)
            out.append(check)
        return out


CHECK = CacheEngaged()  # listed in analysis.checks.CHECKS
