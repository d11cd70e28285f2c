"""Probe prompts: a shared prefix of controlled length, then a test question.

Bins: `N-shot`, the task's own few-shot prompt (the prefix every question at N shots shares, what a
prefix cache holds during a sweep); `chunk-64`, `chunk+64`, `prefix-N`, synthetic prefixes cut from the
exemplar text to a token length, e.g. just below/above the engine's prefill chunk, where a cache hit
hands state across a chunk boundary. All are cut from the same exemplar text, so they nest.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from evalctl.plan import prompts_at, shared_prefix
from evalctl.probe.policy import ProbePolicy
from evalctl.tasks.lmeval import LmEvalTask
from evalctl.tokens import TokenCounter

NEAR_TOKENS = 16


@dataclass(frozen=True)
class ProbePrompt:
    bin: str
    kind: str  # "fewshot" | "synthetic"
    shots: int | None
    doc_id: int
    prefix: str  # what the warm request finds cached; `text` starts with it
    text: str
    prefix_tokens: int
    stop: tuple[str, ...]


def _cut_to_tokens(text: str, tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of `text` (ending at a space) with at most `tokens` tokens: binary search on characters."""
    lo = bisect.bisect_right(range(len(text) + 1), tokens, key=lambda n: counter.count(text[:n])) - 1
    cut = text.rfind(" ", 0, lo + 1)
    return text[: cut if cut > 0 else lo]


def synthetic_lengths(policy: ProbePolicy, chunk_tokens: int | None) -> dict[str, int]:
    """Bin label -> prefix tokens, shortest first."""
    wanted = {f"prefix-{n}": n for n in policy.prefix_tokens}
    if chunk_tokens:
        wanted |= {f"chunk{offset:+d}": chunk_tokens + offset for offset in policy.chunk_offsets}
    keep = {label: n for label, n in wanted.items() if policy.min_prefix_tokens <= n <= policy.max_prefix_tokens}
    return dict(sorted(keep.items(), key=lambda item: item[1]))


def build_prompts(
    task: LmEvalTask, shots: list[int], policy: ProbePolicy, counter: TokenCounter, chunk_tokens: int | None = None
) -> list[ProbePrompt]:
    """Few-shot bins at each shot count, then synthetic bins; `questions_per_bin` questions each."""
    prompts: list[ProbePrompt] = []
    questions = prompts_at(task, task.min_shots, policy.questions_per_bin)
    for k in sorted(set(shots)):
        prefix = shared_prefix(prompts_at(task, k, 2))
        n_prefix = counter.count(prefix)
        if n_prefix < policy.min_prefix_tokens:
            continue
        for p in prompts_at(task, k, max(2, policy.questions_per_bin))[: policy.questions_per_bin]:
            prompts.append(ProbePrompt(f"{k}-shot", "fewshot", k, p.doc_id, prefix, p.text, n_prefix, p.stop))
    # A few-shot bin within a few tokens of a synthetic length already tests that length.
    fewshot_tokens = {p.prefix_tokens for p in prompts}
    lengths = {
        label: n for label, n in synthetic_lengths(policy, chunk_tokens).items() if all(abs(n - f) > NEAR_TOKENS for f in fewshot_tokens)
    }
    if lengths:
        source = _exemplar_text(task, max(lengths.values()), counter)
        for label, n in lengths.items():
            prefix = _cut_to_tokens(source, n, counter)
            n_prefix = counter.count(prefix)
            for q in questions:
                text = prefix + "\n\n" + q.text  # the task's few-shot delimiter
                prompts.append(ProbePrompt(label, "synthetic", None, q.doc_id, prefix, text, n_prefix, q.stop))
    return prompts


def _exemplar_text(task: LmEvalTask, tokens: int, counter: TokenCounter) -> str:
    """Exemplar text at least `tokens` long: the shared few-shot prefix, doubling the shot count until it reaches."""
    shots = 8
    while True:
        text = shared_prefix(prompts_at(task, shots, 2))
        if counter.count(text) > tokens or shots >= 256:
            return text
        shots *= 2
