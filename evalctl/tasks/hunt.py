"""The `hunt` workload: request histories generated from the server's and model's shape, not from a known bug.

A prefix-cache bug shows where a server restores state it saved: past a boundary of its shape (an SWA
window, the SWA cache of window + ubatch cells, a prefill micro-batch, a KV block) and back again. The
shape is read when the config loads (`config.resolve_hunt`; what could not be read is assumed and says
so) and recorded in the run's config (`hunt.boundaries`, `hunt.slots`, `hunt.shape`). Each
conversation (`hunt.conversations`, default one more than the server's slots, so the last evicts the
first's slot; more until `MIN_JUDGED` requests are judged), for each boundary B in turn, up to
`max_context`:

- grows past B in `extend` turns (warm requests that only extend what the one before cached: the
  logprob rungs' healthy reference), turn by turn, or with even chance from 55-85% of B in one long
  turn (a pasted document), so that no prompt ends, and no state is saved, near B;
- returns four times around B: to the turn ending nearest B - d, B and B + d (d from 5-25% of B),
  and once far back (a smallest boundary or more); each a regenerate (`rewind`, the same bytes) or
  an edit (`branch`, that turn replaced); the return after an edit regenerates the edited turn (a
  user asks again: llama.cpp #20671's history); after each it grows on by 20-60% of B.

With even chance a conversation opens with one long turn past the smallest boundary (a document, a
long system prompt), so that a return to its opening restores state saved past that boundary.

Earlier questions are answered by their reference answers (`tasks.conversation`), so warm and cold
sides send the same bytes and pair exactly. Every return is judged, with the `references` extensions
nearest it in estimated length (drawn like the returns, from the seed alone); the other requests are
history, sent warm only, and those after a conversation's last judged request are not sent. Not
generated (yet): cuts of the model's own continuation (the transcript holds reference answers), and
an eviction phase that comes back: two conversations interleaved on one slot are each handed back the
exact state llama.cpp's RAM cache saved, so their returns never meet the slot's checkpoints (where
#24411 is); interleaving needs its own kind of return, judged as one.
"""

from __future__ import annotations

import dataclasses
import functools
import random

from evalctl.records import EXTENDING, TurnKind
from evalctl.schema import HuntConfig, SweepConfig
from evalctl.tasks.conversation import Path, Transcript, go_back, renderer, request
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
# until it has this many (one boundary, as vLLM's and SGLang's shape, gives 12 a conversation).
MIN_JUDGED = 30


def boundaries(config: HuntConfig) -> list[int]:
    """The boundaries a hunt aims at: distinct, at least a turn long, at most `max_context`, ascending."""
    found = sorted({b for b in (config.boundaries or {}).values() if SMALLEST_AIMED <= b <= config.max_context})
    return found or [min(512, config.max_context)]


@dataclasses.dataclass(frozen=True)
class Step:
    """One request of a conversation as generated: its text, how it got there, its estimated length, turns, last question."""

    text: str
    kind: TurnKind
    tokens: float
    turn: int
    last: Prompt


def hunt_prompts(prompts: list[Prompt], transcript: Transcript, config: HuntConfig) -> list[Prompt]:
    """Every request of the hunt, in send order per conversation, numbered (`doc_id`) from 0."""
    if not prompts:
        return []
    render = renderer(prompts, transcript)
    out: list[Prompt] = []
    least = config.conversations or (config.slots or 1) + 1
    c = 0
    while c < least or (config.conversations is None and len(out) < MIN_JUDGED):
        out.extend(_conversation(c, random.Random(f"hunt:{config.seed}:{c}"), prompts, config, render, transcript, len(out)))
        c += 1
    return out


def _conversation(c: int, rng: random.Random, pool: list[Prompt], config: HuntConfig, render, transcript: Transcript, start: int):
    path: Path = []
    steps: list[Step] = []

    def tokens(upto: Path) -> float:
        return len(render(upto)) / config.chars_per_token if upto else 0.0

    def new_turn(size: int | None = None) -> tuple[Prompt, ...]:
        """A turn of `size` questions, else of a number drawn from `turn_questions`."""
        return tuple(rng.choice(pool) for _ in range(size or rng.randint(*config.turn_questions)))

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
            turn.append(rng.choice(pool))
        path.append(tuple(turn))
        send("first" if len(path) == 1 else "extend")

    def nearest(target: float) -> int:
        """The turn (1-based, not the last) whose end lies nearest `target` tokens (the first below the first's end)."""
        return min((abs(tokens(path[:t]) - target), t) for t in range(1, len(path)))[1]

    edited: int | None = None  # the turn the last return edited, regenerated by the next
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
    return _requests(c, steps, _references(steps, config.references), transcript, start)


def _references(steps: list[Step], per_return: int) -> set[int]:
    """Every return, and for each the `per_return` extensions nearest it in length (the reference drawn like the returns)."""
    returns = [i for i, step in enumerate(steps) if step.kind not in EXTENDING]
    judged = set(returns)
    for i in returns:
        free = sorted((abs(s.tokens - steps[i].tokens), j) for j, s in enumerate(steps) if s.kind in EXTENDING and j not in judged)
        judged.update(j for _, j in free[:per_return])
    return judged


def _requests(c: int, steps: list[Step], judged: set[int], transcript: Transcript, start: int) -> list[Prompt]:
    """The judged steps as requests, each with the unjudged ones before it as its warm-only history (the rest unsent)."""
    requests: list[Prompt] = []
    history: list[str] = []
    for i, step in enumerate(steps):
        if i not in judged:
            history.append(step.text)
            continue
        requests.append(request(step.last, step.text, transcript.hash_text, start + len(requests), c, step.turn, step.kind, history))
        history.clear()
    return requests


def _build(prompts: list[Prompt], transcript: Transcript, config: SweepConfig) -> list[Prompt]:
    return hunt_prompts(prompts, transcript, config.hunt)


WORKLOAD = Workload(
    "hunt", "histories generated from the server's and model's shape, judged by the exact, logprob and answer rungs", _build
)
