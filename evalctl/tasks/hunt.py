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
import itertools
import random

from evalctl.records import EXTENDING, TurnKind
from evalctl.schema import HuntConfig, SweepConfig
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

# Returns after the eviction phase: to points drawn between the window (or the start) and where the conversation stood.
EVICTED_RETURNS = 2

# The shipped policies' min_n: with fewer judged requests every check is inconclusive, so a hunt adds conversations
# until it has this many (one boundary, as vLLM's and SGLang's shape, gives 12 a conversation).
MIN_JUDGED = 30


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
    least = config.conversations or (config.slots or 1) + 1  # one more than the slots: the last evicts the first's
    c = 0
    while c < least or (config.conversations is None and len(out) < MIN_JUDGED):
        rng = random.Random(f"hunt:{config.seed}:{c}")
        out.extend(_conversation(c, rng, prompts, config, render, transcript, len(out), evict=c == 0))
        c += 1
    return out


def _conversation(
    c: int, rng: random.Random, pool: list[Prompt], config: HuntConfig, render, transcript: Transcript, start: int, evict: bool
):
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

    def restorable(kind: TurnKind, lowest: float) -> list[int]:
        """The turns (1-based, not the last) a `kind` return to keeps history past `lowest` tokens at (a rewind keeps
        the turn, a branch what is before it), but for a rewind not one that would resend a return's bytes."""
        if kind == "rewind":
            return [t for t in range(1, len(path)) if tokens(path[:t]) >= lowest and render(path[:t]) not in resent]
        return [t for t in range(1, len(path)) if tokens(path[: t - 1]) >= lowest]

    def nearest(target: float, kind: TurnKind, lowest: float = 0.0) -> int:
        """The restorable turn whose end lies nearest `target` tokens (any turn if none is)."""
        return min((abs(tokens(path[:t]) - target), t) for t in restorable(kind, lowest) or range(1, len(path)))[1]

    # A sliding window's state is saved only for its last window. Going back from where a conversation stands lands
    # mostly before the first window (most returns went to the first turns), where a server restores a checkpoint that
    # starts at 0 or recomputes (llama.cpp #24411's returns); so with a window each distance is gone back twice: once
    # from where the conversation stands, once to a point past the window (#20671's, as conversation.py's events do).
    floor = (config.boundaries or {}).get("swa_window", 0)
    zones = (0, floor) if floor else (0,)
    edited: int | None = None  # the turn the last return edited, regenerated by the next (a user asks again: llama.cpp #20671)
    # One prompt is judged once: its warm answers are not independent draws (a regenerate may replay the state the edit
    # computed), so an edit that is regenerated is history and its regenerate judged, and no rewind resends a return.
    regenerated: set[int] = set()  # the steps of edits regenerated next
    edit = -1  # the step of the last edit
    resent: set[str] = set()
    if rng.random() < LEAP:  # a long opening (a document, a long system prompt): a return to it restores past a boundary
        leap(boundaries(config)[0] * rng.uniform(1.05, 1.5))
    for boundary in boundaries(config):
        past = boundary * rng.uniform(1.1, 1.5)
        if rng.random() < LEAP:
            grow(boundary * rng.uniform(0.55, 0.85))
            if tokens(path) < boundary:
                leap(past)
        grow(past)
        for (low, high), lowest in itertools.product(DISTANCES, zones):
            back = 0.0 if edited else boundary * rng.uniform(low, high)
            kind: TurnKind = "rewind" if edited else rng.choice(("rewind", "branch"))
            if lowest and not edited:  # far enough along that going `back` lands anywhere past `lowest`, within the cost bound
                grow(min(config.max_context, rng.uniform(lowest, max(lowest, config.max_context - back)) + back))
                while not restorable(kind, lowest) and tokens(path) < config.max_context:
                    grow(tokens(path) + 1)  # one turn more
            point = edited or nearest(tokens(path) - back, kind, lowest)
            # an edit keeps its turn's size: an edited document is still one
            go_back(path, point, kind, functools.partial(new_turn, len(path[point - 1])), len(pool))
            if edited:
                regenerated.add(edit)
            send(kind)
            resent.add(steps[-1].text)
            edited, edit = (point, len(steps) - 1) if kind == "branch" else (None, -1)
            grow(tokens(path) + boundary * rng.uniform(0.2, 0.6))
    capacity = (config.boundaries or {}).get("kv_capacity", 0)
    fillers: list[int] = []
    if evict and 0 < capacity <= config.evict_up_to:
        # The eviction phase: unrelated documents, each a new prompt, past what the server's KV pool holds, then back
        # to this conversation's own turns (each then restored from what eviction left, or recomputed).
        kept, filled = list(path), 0.0
        while filled <= capacity:
            path.clear()
            leap(config.max_context)
            fillers.append(len(steps) - 1)
            filled += tokens(path)
        path[:] = kept
        for _ in range(EVICTED_RETURNS):
            go_back(path, nearest(rng.uniform(0, tokens(path)), "rewind"), "rewind", new_turn, len(pool))
            send("rewind")
            resent.add(steps[-1].text)
            grow(tokens(path) + boundaries(config)[0] * rng.uniform(0.2, 0.6))
    judged = [i for i, step in enumerate(steps) if step.kind not in EXTENDING and i not in regenerated]
    # A reference must find its conversation cached (the rungs count only engaged pairs): an extension of a prompt at least
    # a KV block long (vLLM on CPU counts hits in blocks of 128), not a conversation's first turn nor a filler.
    block = (config.boundaries or {}).get("kv_block", 1)
    references = [i for i, step in enumerate(steps) if step.kind == "extend" and i not in fillers and steps[i - 1].tokens >= block]
    return requests_of(c, steps, _references(steps, judged, references, config.references), transcript.hash_text, start)


def _references(steps: list[Step], returns: list[int], extensions: list[int], per_return: int) -> set[int]:
    """The `returns` judged, and for each the `per_return` `extensions` nearest it in length (the reference drawn like
    the returns)."""
    judged = set(returns)
    for i in returns:
        free = sorted((abs(steps[j].tokens - steps[i].tokens), j) for j in extensions if j not in judged)
        judged.update(j for _, j in free[:per_return])
    return judged


def _build(prompts: list[Prompt], transcript: Transcript, config: SweepConfig) -> list[Prompt]:
    return hunt_prompts(prompts, transcript, config.hunt)


WORKLOAD = Workload(
    "hunt", "histories generated from the server's and model's shape, judged by the exact, logprob and answer rungs", _build
)
