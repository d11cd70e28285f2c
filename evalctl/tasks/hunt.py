"""The `hunt` workload: request histories generated from the server's and model's shape, not from a known bug.

A prefix-cache bug shows where a server restores state it saved: past a boundary of its shape (an SWA
window, the SWA cache of window + ubatch cells, a prefill micro-batch, a KV block) and back again. The
shape is read when the config is loaded (`config.resolve_hunt`: the model file's metadata, the
server's settings; what could not be read is assumed and says so) and recorded in the run's config
(`hunt.boundaries`, `hunt.slots`, `hunt.shape`). Each conversation (`hunt.conversations`, default
one more than the server's slots, one a slot at a time: the last evicts the first's slot), for each
boundary B in turn, up to `max_context`:

- grows turn by turn past B (each turn an `extend`: a warm request that only extends what the
  request before it cached, the healthy reference of the logprob rungs);
- then returns four times around B: to the turn ending nearest B - d, B and B + d (d drawn from
  5-25% of B: just before, on and just past the boundary), and once far back (a smallest boundary or
  more before the end); each return a regenerate (`rewind`, the same bytes again) or an edit
  (`branch`, that turn replaced), and with even chance a regenerate of the previous return's turn
  (an edited turn regenerated: llama.cpp #20671's history); after each, the conversation grows on
  by 20-60% of B from where it returned.

Transcripts answer every earlier question with its reference answer (`tasks.conversation`), so the
warm and cold sides send the same bytes and pair exactly. Every return is judged, and a share
(`judge_extensions`) of the extensions; the others are history, sent warm only. Seeded per
conversation. Not generated (yet): cuts of the model's own continuation (the transcript holds
reference answers, fixed before any server answers) and an eviction phase that comes back: two
conversations interleaved on one slot are each handed back the exact state llama.cpp's RAM cache
saved, so their returns never meet the slot's checkpoints (where #24411 is); interleaving needs
its own kind of return, judged as one.
"""

from __future__ import annotations

import dataclasses
import random

from evalctl.records import TurnKind
from evalctl.schema import HuntConfig, SweepConfig
from evalctl.tasks.conversation import Path, Transcript, go_back, renderer
from evalctl.tasks.spec import Prompt, Workload

# Turn counts are estimated from characters; a boundary smaller than a turn cannot be aimed at.
SMALLEST_AIMED = 64
# How far back a return goes, in boundaries (lowest, highest): just before one, on it, just past it, far past it. A
# return a window or more back is where an SWA checkpoint that holds only its last window must be restored.
DISTANCES = ((0.6, 0.9), (0.95, 1.05), (1.1, 1.3), (1.6, 2.2))


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
    for c in range(config.conversations or (config.slots or 1) + 1):
        out.extend(_conversation(c, random.Random(f"hunt:{config.seed}:{c}"), prompts, config, render, transcript, len(out)))
    return out


def _conversation(c: int, rng: random.Random, pool: list[Prompt], config: HuntConfig, render, transcript: Transcript, start: int):
    path: Path = []
    requests: list[Prompt] = []
    history: list[str] = []

    def tokens(upto: Path) -> float:
        return len(render(upto)) / config.chars_per_token if upto else 0.0

    def new_turn() -> tuple[Prompt, ...]:
        return tuple(rng.choice(pool) for _ in range(rng.randint(*config.turn_questions)))

    def send(kind: TurnKind, judged: bool = False) -> None:
        text, last = render(path), path[-1][-1]
        if kind in ("first", "extend") and not judged and rng.random() >= config.judge_extensions:
            history.append(text)  # sent warm only, before the next judged request
            return
        turn = {"conversation": c, "turn": len(path), "turn_kind": kind, "source_doc_id": last.doc_id, "history": tuple(history)}
        requests.append(
            dataclasses.replace(
                last, doc_id=start + len(requests), text=text, prompt_hash=transcript.hash_text(text), answer_char_offset=None, **turn
            )
        )
        history.clear()

    def grow(until: float) -> None:
        while not path or tokens(path) < until:
            path.append(new_turn())
            send("first" if len(path) == 1 else "extend")

    def nearest(target: float) -> int | None:
        """The turn (1-based, not the last) whose end lies nearest `target` tokens (the first below the first's end)."""
        ends = [(abs(tokens(path[:t]) - target), t) for t in range(1, len(path))]
        return min(ends)[1] if ends else None

    last_point: int | None = None
    for boundary in boundaries(config):
        grow(boundary * rng.uniform(1.1, 1.5))
        for low, high in DISTANCES:
            revisit = last_point is not None and last_point < len(path) and rng.random() < 0.5
            point = last_point if revisit else nearest(tokens(path) - boundary * rng.uniform(low, high))
            if point is None:
                continue
            kind: TurnKind = "rewind" if revisit else rng.choice(("rewind", "branch"))
            go_back(path, point, kind, new_turn, len(pool))
            send(kind)
            last_point = point
            grow(tokens(path) + boundary * rng.uniform(0.2, 0.6))
    if history:  # the last extension judged after all: a history with no request after it would never be sent
        history.pop()
        send("extend", judged=True)
    return requests


def _build(prompts: list[Prompt], transcript: Transcript, config: SweepConfig) -> list[Prompt]:
    return hunt_prompts(prompts, transcript, config.hunt)


WORKLOAD = Workload(
    "hunt", "histories generated from the server's and model's shape, judged by the exact, logprob and answer rungs", _build
)
