"""Characters per token estimated with a GGUF's vocabulary (`servers.vocabulary`), no server."""

from __future__ import annotations

import pytest

from evalctl.servers.vocabulary import BYTE_LEVEL, SENTENCEPIECE, chars_per_token, count_tokens


def test_greedy_match_takes_the_longest_piece_in_the_vocabularys_spelling():
    pieces = {"the", "\u2581th", "e", "\u2581", "c", "a", "t", "\u2581cat"}
    assert count_tokens("the cat", SENTENCEPIECE, pieces) == 2  # the ▁cat
    assert count_tokens("the caat", SENTENCEPIECE, pieces) == 6  # the ▁ c a a t: no ▁caat, no ▁ca
    byte_level = {"\u0120the", "\u0120cat", "the", "\u010a"}  # Ġ a space, Ċ a newline
    assert count_tokens("the cat\n the", BYTE_LEVEL, byte_level) == 4
    assert count_tokens("é", BYTE_LEVEL, byte_level) == 2  # two UTF-8 bytes, neither a piece: one token each


def test_a_model_whose_vocabulary_cannot_be_read_says_why(tmp_path):
    assert chars_per_token(None, ["text"]) == (None, "no GGUF model file read")
    (tmp_path / "m.gguf").write_bytes(b"GGML")
    ratio, source = chars_per_token(str(tmp_path / "m.gguf"), ["text"])
    assert ratio is None and "not a GGUF file" in source


@pytest.mark.parametrize(("model", "lowest", "highest"), [("bundled:smollm2-135m", 1.4, 1.7)])
def test_the_bundled_models_ratio_lies_near_its_tokenizers(model, lowest, highest):
    """SmolLM2's own tokenizer gives prefix-recall's prompts 1.49 characters a token; the greedy estimate 1.57."""
    from evalctl.config import config_from_dict

    profile = {"name": "cpu", "model_path": model, "engine": {"name": "llamacpp", "parallel": 1}}
    assert lowest < config_from_dict({"model": "m", "servers": [profile]}, {"workload": "hunt"}, "t").hunt.chars_per_token < highest
