"""Agreement with the cache-off answer: a paired measure for a model whose task accuracy means nothing.

A model with random weights (bundled:tiny-hybrid) answers every question wrong, cache on or off, so a paired test of
task accuracy sees no flip whatever the cache does. A correct engine guarantees more, with no right answer needed:
under greedy decoding a request gives the same text whether its prefix came from the cache or not. So a row is
"right" when its response is the one the cache-off cell of the same server gave to the same prompt (same profile,
variant, shots, doc and prompt hash; that cell's first pass at the sweep's lowest concurrency, so an answer changed
by load disagrees too). The cache-off rows are the reference and agree with themselves.

Through the gate's paired test (`analysis.drop_rule`) this becomes a test on the disagreement rate: the reference is
right on every pair, so b counts the disagreements, c is 0, and the drop is the disagreement share; the rule's
guarantees hold unchanged (they hold for any paired binary outcome). A variant or run comparison at cache on
compares disagreement shares (a faulty build's cache-on answers disagree with its own cache-off ones; a real
build's do not). Noise: the A/A replica (the cache-off cell run again, cold) is scored against the first run, so
its flips are cold-vs-cold disagreements, the engine's own nondeterminism.

Sound only where the engine is meant to be deterministic: greedy decoding (temperature 0) and numerics independent
of batching; the A/A arm measures the latter, and its noise widens the gate's margin (`analysis.noise`). It cannot
compare servers (each is scored against its own cache-off answers): judge profiles by a task metric.

Not recorded: derived from the samples when asked for (a gate policy's `metric: agreement`, `Run.metric`). A row
whose reference got no answer scores None; in a comparison that counts as the candidate's request error, i.e.
wrong: it errs toward a regression, never a pass.
"""

from __future__ import annotations

import pandas as pd

from evalctl.records import ANSWER_SUFFIX, CORRECT_SUFFIX, Metric
from evalctl.schema import CacheMode

AGREEMENT: Metric = "agreement"
# The rows an answer is compared with: same server, same question, the cache-off cell's first pass.
REFERENCE_KEYS = ["profile", "variant", "shots", "doc_id", "prompt_hash"]


def _answered(df: pd.DataFrame) -> pd.Series:
    return df["error"].isna() & df["response"].notna()


def with_agreement(rows: pd.DataFrame, samples: pd.DataFrame | None = None) -> pd.DataFrame:
    """`rows` plus the agreement metric's columns: `agreement_answer` (the response, None when there was
    none) and `agreement_correct` (the response equals the cache-off one; None without a cache-off answer).

    `samples` holds the reference answers (default: `rows` itself; the A/A replica passes the run's samples,
    so its rows are judged against the first run, never against themselves).
    """
    columns = (AGREEMENT + ANSWER_SUFFIX, AGREEMENT + CORRECT_SUFFIX)
    if rows.empty:
        return rows.assign(**{c: pd.Series(dtype=object) for c in columns})
    samples = rows if samples is None else samples
    # Each question's cache-off answer: first pass, lowest concurrency.
    first = (samples["pass_index"] == 1) & (samples["concurrency"] == samples["concurrency"].min())
    off = samples[(samples["cache"] == CacheMode.off.value) & first & _answered(samples)]
    reference = off.drop_duplicates(REFERENCE_KEYS, keep="last")[[*REFERENCE_KEYS, "response"]]
    expected = rows[REFERENCE_KEYS].merge(reference, on=REFERENCE_KEYS, how="left")["response"].to_numpy()
    answered = _answered(rows).to_numpy()
    # A row with no answer, or no cache-off answer to hold it to, has nothing to score (None).
    correct = [bool(got == want) if ok and isinstance(want, str) else None for got, want, ok in zip(rows["response"], expected, answered)]
    answers = pd.Series([got if ok else None for got, ok in zip(rows["response"], answered)], index=rows.index, dtype=object)
    return rows.assign(**{columns[0]: answers, columns[1]: pd.Series(correct, index=rows.index, dtype=object)})
