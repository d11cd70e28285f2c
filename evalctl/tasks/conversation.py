"""Conversation workloads: any task's questions sent as conversations that grow, rewind and branch.

docs/conversations.md says how a conversation is built and why the gate's guarantees hold unchanged.
Every earlier turn is answered by its reference answer, never the model's, so the cache-on and
cache-off sides send the same bytes and stay paired prompt for prompt. With `judge: returns` only the
returns are scored; the requests before each are its warm-only `history` (a cold server, with nothing
cached, gets the return alone).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable

from evalctl.records import EXTENDING, TurnKind
from evalctl.schema import ConversationConfig, EventKind, HuntConfig
from evalctl.tasks.spec import Prompt, Workload


@dataclasses.dataclass(frozen=True)
class Transcript:
    """How a task writes a question's reference answer after it, and one question after another."""

    answer_of: dict[str, str]  # prompt hash -> the reference answer as the task renders it (doc_to_target)
    hash_text: Callable[[str], str]  # the task's prompt hash
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"


def shared_prefix(prompts: list[Prompt] | tuple[Prompt, ...]) -> str:
    """The prefix every prompt shares (empty when prompts differ from the start): what a prefix cache can hold."""
    return os.path.commonprefix([p.text for p in prompts]) if len(prompts) > 1 else ""


Path = list[tuple[Prompt, ...]]  # a conversation so far: its turns, each one or more questions


def renderer(prompts: list[Prompt], transcript: Transcript) -> Callable[[Path], str]:
    """The text of a conversation's turns: the first question whole, each later one without the prompts' shared prefix,
    every question but the last followed by its reference answer."""
    shared = shared_prefix(prompts)

    def unit(p: Prompt, first: bool) -> str:
        return p.text if first else p.text[len(shared) :]

    def answered(p: Prompt, first: bool) -> str:
        return unit(p, first) + transcript.target_delimiter + transcript.answer_of[p.prompt_hash] + transcript.fewshot_delimiter

    def render(path: Path) -> str:
        questions = [q for turn in path for q in turn]
        return "".join(answered(q, i == 0) for i, q in enumerate(questions[:-1])) + unit(questions[-1], len(questions) == 1)

    return render


def conversation_prompts(prompts: list[Prompt], transcript: Transcript, config: ConversationConfig) -> list[Prompt]:
    """Every request of the workload, in send order per conversation, numbered (`doc_id`) from 0: a `Prompt` of its
    last question (its doc, target and stop), its text the transcript so far (the config's fields say how it grows,
    rewinds and branches)."""
    if not prompts:
        return []
    render = renderer(prompts, transcript)
    out: list[Prompt] = []
    for c in range(config.conversations):
        rng = random.Random(f"conversation:{config.seed}:{c}")
        out.extend(_one(c, rng, prompts, config, render, transcript.hash_text, start=len(out)))
    return out


@dataclasses.dataclass(frozen=True)
class Step:
    """One request of a conversation as generated: its text, how it got there, its estimated length, turns, last question."""

    text: str
    kind: TurnKind
    tokens: float
    turn: int
    last: Prompt


def _one(
    c: int, rng: random.Random, pool: list[Prompt], config: ConversationConfig, render, hash_text: Callable[[str], str], start: int
) -> list[Prompt]:
    draw = Drawing(rng, pool, config, render)
    draw.grow(config.grow_past * max(config.boundaries))
    step = min(config.boundaries)
    last_point: int | None = None
    for event in range(config.events):
        path, end = draw.path, draw.tokens()
        # Turn t (1-based) ends where path[:t] does: far enough back that a window lies between, and
        # the history kept (the turns before t) past the first window: before it an engine recomputes
        # from scratch, with nothing to restore.
        back = [t for t in range(1, len(path)) if end - draw.tokens(path[:t]) >= step]
        candidates = [t for t in back if draw.tokens(path[: t - 1]) >= step] or back or list(range(1, len(path)))
        if not candidates:
            break
        point = last_point if last_point in candidates and rng.random() < config.revisit else rng.choice(candidates)
        kind: EventKind = config.first_event if event == 0 and config.first_event else rng.choice(config.kinds)
        draw.back(point, kind)
        last_point = point
        draw.grow(draw.tokens() + rng.choice(config.boundaries) * rng.uniform(*config.regrow))
    judged = {i for i, s in enumerate(draw.steps) if config.judge == "every" or s.kind not in EXTENDING}
    return requests_of(c, draw.steps, judged, hash_text, start)


class Drawing:
    """One conversation as it is drawn from `rng`: its path of turns and the requests sent so far. With `replaced` (the
    pool's questions in another order) each question drawn is replaced by the one at its place there; it grows to
    `least` turns at least (a hunt's return needs one to go back to)."""

    def __init__(
        self, rng: random.Random, pool: list[Prompt], config: ConversationConfig | HuntConfig, render, replaced=None, least: int = 0
    ):
        self.rng, self.pool, self.config, self.render, self.least = rng, pool, config, render, least
        self.replaced: list[Prompt] = replaced or pool
        self.path: Path = []
        self.steps: list[Step] = []

    def question(self) -> Prompt:
        return self.replaced[self.rng.choice(range(len(self.pool)))]  # draws as rng.choice(pool) does

    def tokens(self, upto: Path | None = None) -> float:
        upto = self.path if upto is None else upto
        return len(self.render(upto)) / self.config.chars_per_token if upto else 0.0

    def new_turn(self, size: int | None = None) -> tuple[Prompt, ...]:
        """A turn of `size` questions, else of a number drawn from `turn_questions`."""
        return tuple(self.question() for _ in range(size or self.rng.randint(*self.config.turn_questions)))

    def send(self, kind: TurnKind) -> None:
        self.steps.append(Step(self.render(self.path), kind, self.tokens(), len(self.path), self.path[-1][-1]))

    def grow(self, until: float) -> None:
        while len(self.path) < self.least or self.tokens() < until:
            self.path.append(self.new_turn())
            self.send("first" if len(self.path) == 1 else "extend")

    def leap(self, until: float) -> None:
        """One long turn (a pasted document) to `until`: no prompt ends inside it, so no state was saved there."""
        turn: list[Prompt] = []
        while not turn or self.tokens([*self.path, tuple(turn)]) < until:
            turn.append(self.question())
        self.path.append(tuple(turn))
        self.send("first" if len(self.path) == 1 else "extend")

    def nearest(self, target: float) -> int:
        """The turn (1-based, not the last) whose end lies nearest `target` tokens (the first below the first's end)."""
        return min((abs(self.tokens(self.path[:t]) - target), t) for t in range(1, len(self.path)))[1]

    def back(self, point: int, kind: TurnKind, size: int | None = None) -> None:
        """A return to the path's first `point` turns, sent; a branch then replaces the last one kept with another turn
        (of `size` questions; an edit: another than the one it replaces, since the same one would be a rewind)."""
        del self.path[point:]
        if kind == "branch":
            edited = self.path[-1]
            while self.path[-1] == edited and len(self.pool) > 1:
                self.path[-1] = self.new_turn(size)
        self.send(kind)


def requests_of(c: int, steps: list[Step], judged: set[int], hash_text: Callable[[str], str], start: int) -> list[Prompt]:
    """Conversation `c`'s judged steps as requests numbered from `start`, each a `Prompt` of its last question (its doc,
    target and stop) with the unjudged steps before it as its warm-only history (those after the last are unsent)."""
    requests: list[Prompt] = []
    history: list[str] = []
    for i, step in enumerate(steps):
        if i not in judged:
            history.append(step.text)
            continue
        meta = {"conversation": c, "turn": step.turn, "turn_kind": step.kind, "source_doc_id": step.last.doc_id, "history": tuple(history)}
        doc_id = start + len(requests)
        requests.append(
            dataclasses.replace(step.last, doc_id=doc_id, text=step.text, prompt_hash=hash_text(step.text), answer_char_offset=None, **meta)
        )
        history.clear()
    return requests


WORKLOAD = Workload(
    "conversation",
    "the task's questions as conversations that grow, rewind and branch (`conversation:`)",
    lambda prompts, transcript, config: conversation_prompts(prompts, transcript, config.conversation or ConversationConfig()),
)


def chains(prompts: list[Prompt]) -> list[list[int]]:
    """Indices into `prompts` grouped by conversation, each in send order (a prompt of no conversation: alone)."""
    groups: dict[object, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(("c", p.conversation) if p.conversation is not None else ("p", i), []).append(i)
    return list(groups.values())


def to_send(prompts: list[Prompt], done: Callable[[Prompt], bool]) -> list[Prompt]:
    """The prompts not `done`; a conversation's requests are its history, so one left unanswered sends
    its whole conversation again (compaction keeps one row per request)."""
    todo = {p.conversation for p in prompts if not done(p)}
    return [p for p in prompts if p.conversation in todo and (p.conversation is not None or not done(p))]


@dataclasses.dataclass(frozen=True)
class Request:
    """One request to send: a scored prompt, or a step of its history (`scored` False)."""

    text: str
    prompt: Prompt
    scored: bool


def with_history(prompts: list[Prompt], warm: bool) -> list[Request]:
    """What to send: on a warm (cache-on) server each prompt after its history; on a cold one alone."""
    out: list[Request] = []
    for p in prompts:
        out.extend(Request(text, p, False) for text in (p.history if warm else ()))
        out.append(Request(p.text, p, True))
    return out
