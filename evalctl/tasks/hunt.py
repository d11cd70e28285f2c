"""The `hunt` workload: request histories generated from the server's and model's shape, not from a known bug.

A prefix-cache bug shows where a server restores state it saved: past a boundary of its shape (an SWA
window, the SWA cache, a micro-batch, a KV block) and back again. For each boundary a conversation grows
past it, turn by turn or in one long turn (no prompt ends, so no state is saved, near it), then returns
around it (rewinds and branches) and grows on. docs/conversations.md (`hunt`) gives the mix, the shape
read at load (`config.resolve_hunt`) and what is not generated yet. Every return is judged with its
`references` nearest extensions (their healthy warm-vs-cold reference); the rest is warm-only history.
"""

from __future__ import annotations

import functools
import random

from evalctl.errors import ConfigError
from evalctl.records import EXTENDING, TurnKind
from evalctl.schema import HuntConfig, Lead, SweepConfig
from evalctl.tasks.conversation import Path, Step, Transcript, go_back, renderer, requests_of
from evalctl.tasks.spec import Prompt, Workload

# Turn counts are estimated from characters; a boundary smaller than a turn cannot be aimed at.
SMALLEST_AIMED = 64
# How far back a return goes, in boundaries: just before one, on it, just past it, far past it (where an SWA
# checkpoint that holds only its last window must be restored).
DISTANCES = ((0.6, 0.9), (0.95, 1.05), (1.1, 1.3), (1.6, 2.2))


# The chance a conversation crosses a boundary in one long turn rather than turn by turn. Servers save state where a
# prompt ends (llama.cpp's checkpoints, SGLang's Mamba states): a return inside a long turn must restore an older one.
LEAP = 0.5

# The shipped policies' min_n: with fewer judged requests every check is inconclusive, so a hunt adds conversations
# until it has this many (one boundary, as SGLang's shape, gives 12 a conversation).
MIN_JUDGED = 30
# The divergence rung's `min_reference`: healthy pairs a cell needs before the logprob rungs decide.
MIN_REFERENCE = 10


def boundaries(config: HuntConfig) -> list[int]:
    """The boundaries a hunt aims at: distinct, at least a turn long, at most `max_context`, ascending."""
    found = sorted({b for b in (config.boundaries or {}).values() if SMALLEST_AIMED <= b <= config.max_context})
    return found or [min(512, config.max_context)]


def hunt_prompts(prompts: list[Prompt], transcript: Transcript, config: HuntConfig) -> list[Prompt]:
    """Every request of the hunt, in send order per conversation, numbered (`doc_id`) from 0."""
    if not prompts:
        return []
    render = renderer(prompts, transcript)
    out: list[Prompt] = []
    if config.follow:
        # enough copies for the policies' min_n in all (fewer leave the answer rung undecided by construction), and for
        # the divergence rung's healthy pairs from each lead alone: a short lead's extensions may find nothing cached
        # (b9294 reused none of a 100-token extension's 58 cached tokens), leaving the other lead's to judge by
        fewest = max(-(-MIN_JUDGED // ((1 + config.references) * len(config.follow))), -(-MIN_REFERENCE // config.references))
        each = config.copies or fewest
        copies = [(lead, k) for lead in config.follow for k in range(each)]
        for c, (lead, k) in enumerate(copies):
            other = prompts.copy()  # each question of the lead's conversation replaced by another, the same one each time
            random.Random(f"hunt:{config.seed}:{lead.conversation}:{lead.ret}:{k}").shuffle(other)
            steps = _conversation(_shape(config, lead.conversation), prompts, config, render, other)
            out.extend(_requests(c, steps, config, transcript, len(out), lead))
        return out
    least = config.conversations or (config.slots or 1) + 1  # one more than the slots: the last evicts the first's
    c = 0
    while c < least or (config.conversations is None and len(out) < MIN_JUDGED):
        out.extend(_requests(c, _conversation(_shape(config, c), prompts, config, render), config, transcript, len(out)))
        c += 1
    return out


def _shape(config: HuntConfig, conversation: int) -> random.Random:
    return random.Random(f"hunt:{config.seed}:{conversation}")


def _conversation(rng: random.Random, pool: list[Prompt], config: HuntConfig, render, replaced: list[Prompt] | None = None) -> list[Step]:
    """A conversation's steps drawn from `rng`; with `replaced` (the pool's questions in another order), a copy: `rng`
    draws every choice as the original did, and each question drawn is replaced by the one at its place in `replaced` (so
    the same turn edited or repeated is so again, and questions of one length keep every length)."""
    path: Path = []
    steps: list[Step] = []

    def question() -> Prompt:
        return (replaced or pool)[rng.choice(range(len(pool)))]  # draws as rng.choice(pool) does

    def tokens(upto: Path) -> float:
        return len(render(upto)) / config.chars_per_token if upto else 0.0

    def new_turn(size: int | None = None) -> tuple[Prompt, ...]:
        """A turn of `size` questions, else of a number drawn from `turn_questions`."""
        return tuple(question() for _ in range(size or rng.randint(*config.turn_questions)))

    def send(kind: TurnKind) -> None:
        steps.append(Step(render(path), kind, tokens(path), len(path), path[-1][-1]))

    def grow(until: float) -> None:
        while len(path) < 2 or tokens(path) < until:  # two turns at least: a return needs one to go back to
            path.append(new_turn())
            send("first" if len(path) == 1 else "extend")

    def leap(until: float) -> None:
        """One long turn (a pasted document) to `until`: no prompt ends inside it, so no state was saved there."""
        turn: list[Prompt] = []
        while not turn or tokens([*path, tuple(turn)]) < until:
            turn.append(question())
        path.append(tuple(turn))
        send("first" if len(path) == 1 else "extend")

    def nearest(target: float) -> int:
        """The turn (1-based, not the last) whose end lies nearest `target` tokens (the first below the first's end)."""
        return min((abs(tokens(path[:t]) - target), t) for t in range(1, len(path)))[1]

    edited: int | None = None  # the turn the last return edited, regenerated by the next (a user asks again: llama.cpp #20671)
    if rng.random() < LEAP:  # a long opening (a document, a long system prompt): a return to it restores past a boundary
        leap(boundaries(config)[0] * rng.uniform(1.05, 1.5))
    for boundary in boundaries(config):
        past = boundary * rng.uniform(1.1, 1.5)
        if rng.random() < LEAP:
            grow(boundary * rng.uniform(0.55, 0.85))
            if tokens(path) < boundary:
                leap(past)
        grow(past)
        for low, high in DISTANCES:
            point = edited or nearest(tokens(path) - boundary * rng.uniform(low, high))
            kind: TurnKind = "rewind" if edited else rng.choice(("rewind", "branch"))
            # an edit keeps its turn's size: an edited document is still one
            go_back(path, point, kind, functools.partial(new_turn, len(path[point - 1])), len(pool))
            send(kind)
            edited = point if kind == "branch" else None
            grow(tokens(path) + boundary * rng.uniform(0.2, 0.6))
    return steps


def _requests(c: int, steps: list[Step], config: HuntConfig, transcript: Transcript, start: int, lead: Lead | None = None):
    """Conversation `c`'s requests, every return judged; a copy of `lead`'s conversation ends at the lead's return, the
    one judged."""
    returns = [i for i, step in enumerate(steps) if step.kind not in EXTENDING]
    if lead is not None:
        if lead.ret >= len(returns):
            raise ConfigError(
                f"hunt.follow: conversation {lead.conversation} has {len(returns)} returns, no return {lead.ret}: was the lead"
                " found by a hunt with another seed, shape or evalctl version?"
            )
        del steps[returns[lead.ret] + 1 :]
        # a copy's first request meets an empty slot (cached at most the task's instruction): as a reference it may not
        # engage, and a follow-up of an early return would be left too few healthy pairs to judge
        return requests_of(c, steps, _references(steps, [returns[lead.ret]], config.references, ("extend",)), transcript.hash_text, start)
    return requests_of(c, steps, _references(steps, returns, config.references), transcript.hash_text, start)


def _references(steps: list[Step], returns: list[int], per_return: int, among: tuple[TurnKind, ...] = EXTENDING) -> set[int]:
    """The `returns`, and for each the `per_return` requests of a kind `among` nearest it in length (the reference drawn like
    the returns)."""
    judged = set(returns)
    for i in returns:
        free = sorted((abs(s.tokens - steps[i].tokens), j) for j, s in enumerate(steps) if s.kind in among and j not in judged)
        judged.update(j for _, j in free[:per_return])
    return judged


def _build(prompts: list[Prompt], transcript: Transcript, config: SweepConfig) -> list[Prompt]:
    return hunt_prompts(prompts, transcript, config.hunt)


WORKLOAD = Workload(
    "hunt", "histories generated from the server's and model's shape, judged by the exact, logprob and answer rungs", _build
)
