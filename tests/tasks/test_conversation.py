"""Conversation workloads without a server: the generator's histories, and a real task built into them."""

from __future__ import annotations

import pytest

from evalctl.config import config_from_dict
from evalctl.errors import ConfigError
from evalctl.schema import ConversationConfig
from evalctl.tasks.conversation import Transcript, chains, conversation_prompts, to_send, with_history
from evalctl.tasks.lmeval import LmEvalTask, Prompt, prompt_hash

PREFIX = "Answer each question.\n\n"


def questions(n: int = 30) -> list[Prompt]:
    out = []
    for i in range(n):
        text = PREFIX + f"Q{i}: " + "word " * (20 + 7 * (i % 5)) + "?\nA:"
        out.append(Prompt(i, text, prompt_hash(text), f"Q{i}", str(i), ("\n",), {"i": i}))
    return out


def transcript(prompts: list[Prompt]) -> Transcript:
    return Transcript(answer_of={p.prompt_hash: f"answer {p.doc_id}" for p in prompts}, hash_text=prompt_hash)


def build(**fields) -> list[Prompt]:
    pool = questions()
    return conversation_prompts(pool, transcript(pool), ConversationConfig(**fields))


def test_same_seed_same_workload_and_another_seed_another():
    assert build(seed=5) == build(seed=5)
    assert [p.text for p in build(seed=5)] != [p.text for p in build(seed=6)]


def test_turns_extend_the_transcript_and_events_go_back_past_a_boundary():
    cfg = ConversationConfig(conversations=3, boundaries=[60, 90], grow_past=2.0, events=4, turn_questions=(1, 3))
    pool = questions()
    requests = conversation_prompts(pool, transcript(pool), cfg)
    assert [p.doc_id for p in requests] == list(range(len(requests)))  # requests numbered: pairing key
    kinds = {p.turn_kind for p in requests}
    assert {"first", "extend", "rewind", "branch"} <= kinds
    for group in chains(requests):
        conv = [requests[i] for i in group]
        assert conv[0].turn_kind == "first" and conv[0].turn == 1 and conv[0].text.startswith(PREFIX)
        # growth first reaches grow_past x the largest boundary (estimated tokens: chars / 4)
        first_event = next(i for i, p in enumerate(conv) if p.turn_kind in ("rewind", "branch"))
        assert len(conv[first_event - 1].text) / cfg.chars_per_token >= 2.0 * 90
        seen: dict[int, str] = {1: conv[0].text}
        for prev, cur in zip(conv, conv[1:]):
            if cur.turn_kind == "extend":
                assert cur.text.startswith(prev.text + " answer "), "a turn extends the last, answered by its reference"
                assert cur.turn == prev.turn + 1
            else:
                assert cur.turn < prev.turn
                # gone back at least the smallest boundary from where the conversation stood
                assert (len(prev.text) - len(cur.text)) / cfg.chars_per_token >= 60 or cur.turn_kind == "branch"
            if cur.turn_kind == "rewind":
                assert cur.text == seen[cur.turn], "a rewind resends the turn's bytes (a regenerate)"
            if cur.turn_kind == "branch":
                assert cur.text != seen.get(cur.turn), "a branch edits the turn"
            seen[cur.turn] = cur.text


def test_earlier_turns_hold_the_reference_answer_and_each_request_asks_its_last_question():
    for p in build(conversations=2, boundaries=[40], events=2):
        asked = p.doc["i"]
        assert p.source_doc_id == asked and p.target == str(asked)
        assert p.text.endswith("?\nA:")  # asks, unanswered
        answered = p.text.count(" answer ")
        assert answered == p.text.count("?\nA:") - 1  # every earlier question answered by its reference


def test_chains_keep_send_order_and_plain_prompts_alone():
    requests = build(conversations=3, boundaries=[40], events=1)
    groups = chains(requests)
    assert len(groups) == 3 and all(g == sorted(g) for g in groups)
    assert chains(questions(4)) == [[0], [1], [2], [3]]


@pytest.mark.parametrize(
    "fields",
    [{"boundaries": []}, {"boundaries": [0]}, {"kinds": [], "events": 1}, {"turn_questions": (2, 1)}, {"conversations": 0}],
)
def test_bad_conversation_config_is_refused(fields):
    with pytest.raises(ValueError):
        ConversationConfig(**fields)


def test_sequential_stopping_cannot_stop_a_conversation_midway():
    base = {"model": "m", "servers": [{"name": "s", "url": "http://x", "model_path": "m"}], "conversation": {}}
    config_from_dict(base, None, "test")
    with pytest.raises(ConfigError, match="conversation"):
        config_from_dict({**base, "stopping": {"mode": "sequential", "baseline": "x"}}, None, "test")


def test_a_real_task_becomes_conversations_with_its_own_answers_and_scoring():
    cfg = ConversationConfig(conversations=2, boundaries=[128], events=2)
    task = LmEvalTask("prefix-recall", data_dir=None, fewshot="sampled", workload=lambda q, t: conversation_prompts(q, t, cfg))
    requests = task.prompts(6, 20)
    assert requests == task.prompts(6, 20)
    for group in chains(requests):
        fresh = [requests[i].prompt_hash for i in group if requests[i].turn_kind != "rewind"]
        assert len(set(fresh)) == len(fresh), "only a rewind resends a transcript"
    for p in requests:
        # the turn's question is scored by the task's own filters: its reference answer is right
        assert task.score(p, " " + p.target).correct["strict"]
        assert not task.score(p, " 100").correct["strict"]
    longest = max(len(p.text) for p in requests)
    assert longest / cfg.chars_per_token >= 2 * 128


def test_a_resumed_run_resends_whole_conversations_and_only_unfinished_plain_prompts():
    requests = build(conversations=2, boundaries=[40], events=1)
    first = {i for i in chains(requests)[0]}
    done_but_one = {p.doc_id for p in requests} - {max(first)}
    resent = to_send(requests, lambda p: p.doc_id in done_but_one)
    assert {p.doc_id for p in resent} == first
    plain = questions(4)
    assert to_send(plain, lambda p: p.doc_id != 2) == [plain[2]]


def test_events_keep_a_history_past_the_first_window_and_revisit_the_last_point():
    cfg = ConversationConfig(conversations=3, boundaries=[60], grow_past=4.0, events=6, revisit=1.0, regrow=(1.0, 1.0), seed=3)
    requests = build(**cfg.model_dump())
    for group in chains(requests):
        conv = [requests[i] for i in group]
        events = [p for p in conv if p.turn_kind in ("rewind", "branch")]
        assert len(events) == 6
        # revisit 1.0: every event after the first goes back to the turn the first went to
        assert len({p.turn for p in events}) == 1
        # the history kept before the event's turn is past the first window (estimated tokens)
        turn = events[0].turn
        kept = next(p for p in conv if p.turn == turn - 1)
        assert len(kept.text) / cfg.chars_per_token >= 60


def test_regrow_must_be_an_ordered_positive_range():
    with pytest.raises(ValueError, match="regrow"):
        ConversationConfig(regrow=(2.0, 1.0))


def test_an_edited_turn_regenerated_at_every_event():
    """first_event branch, then rewinds to it: every event after the edit resends the edited turn's bytes."""
    cfg = ConversationConfig(conversations=3, boundaries=[60], grow_past=4.0, events=5, first_event="branch", kinds=["rewind"], revisit=1.0)
    requests = build(**cfg.model_dump())
    for group in chains(requests):
        events = [requests[i] for i in group if requests[i].turn_kind in ("rewind", "branch")]
        assert [p.turn_kind for p in events] == ["branch"] + ["rewind"] * 4
        assert {p.text for p in events} == {events[0].text}
    assert build(events=5) == build(events=5, first_event=None)  # unset: every kind drawn, the workload as before


def test_judged_at_returns_the_history_leads_up_to_each_return_and_only_returns_are_scored():
    """judge returns: the same conversations; each return carries the requests sent before it as its history,
    sent to a warm server first and not at all to a cold one."""
    every = build(conversations=3, boundaries=[60], events=2, kinds=["rewind"], revisit=0.0)
    judged = build(conversations=3, boundaries=[60], events=2, kinds=["rewind"], revisit=0.0, judge="returns")
    returns = [p for p in every if p.turn_kind == "rewind"]
    assert [p.text for p in judged] == [p.text for p in returns]
    assert [p.doc_id for p in judged] == list(range(len(judged)))  # numbered as scored: the pairing key
    for group in chains(every):
        conv = [every[i] for i in group]
        scored = [p for p in judged if p.conversation == conv[0].conversation]
        sent = [t for p in scored for t in (*p.history, p.text)]
        # what a warm server gets is the conversation as judge every sends it, but its trailing growth
        assert sent == [p.text for p in conv][: len(sent)] and conv[len(sent) - 1].turn_kind == "rewind"
    warm = with_history(judged, warm=True)
    cold = with_history(judged, warm=False)
    assert [r.text for r in cold] == [p.text for p in judged] and all(r.scored for r in cold)
    assert [r.prompt.doc_id for r in warm if r.scored] == [p.doc_id for p in judged]
    assert sum(not r.scored for r in warm) == sum(len(p.history) for p in judged) > 0
    with pytest.raises(ValueError, match="events >= 1"):
        ConversationConfig(judge="returns", events=0)


def test_a_workload_is_named_from_the_registry_and_asks_for_logprobs():
    base = {"model": "m", "servers": [{"name": "s", "url": "http://x", "model_path": "m"}]}
    implied = config_from_dict({**base, "conversation": {}}, None, "test")
    assert (implied.workload, implied.generation.top_logprobs) == ("conversation", 5)
    named = config_from_dict(base, {"workload": "conversation"}, "test")
    assert named.workload == "conversation" and named.conversation is None  # its block's defaults
    assert config_from_dict(base, None, "test").generation.top_logprobs == 0  # questions alone: none asked
    with pytest.raises(ConfigError, match="unknown workload 'nope'; known: conversation"):
        config_from_dict(base, {"workload": "nope"}, "test")
