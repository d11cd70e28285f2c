"""Characters per token of a task's text, estimated with the model's vocabulary read from its GGUF file: the `hunt`
workload aims at token counts (a window, a micro-batch) but writes text, so this ratio decides where its turns end and
its returns land.

Greedy longest match over the vocabulary is not the model's tokenizer (BPE merges, SentencePiece scores), but it lands
near it: on prefix-recall prompts Gemma-3's vocabulary gives 1.67 characters a token where llama.cpp counts 1.63. The
2.0 assumed before put every aim 21% deeper than meant on Gemma-3.
"""

from __future__ import annotations

import struct

from evalctl.servers.shape import gguf_metadata

# How a vocabulary writes a space: SentencePiece's "▁"; byte-level BPE (GPT-2's scheme) maps every byte to a printable
# character, a space to "Ġ".
SENTENCEPIECE, BYTE_LEVEL = "llama", "gpt2"
LONGEST = 32  # longer pieces are rare in prose and numbers; capping the match keeps an estimate of 10k characters fast


def _byte_to_char() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte: printable Latin-1 bytes stand for themselves, the rest from U+0100 on."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(0x100 + i) for i, b in enumerate(others)}}


_BYTES = _byte_to_char()


def _spelled(text: str, model: str) -> str:
    """`text` as the vocabulary writes it."""
    if model == BYTE_LEVEL:
        return "".join(_BYTES[b] for b in text.encode("utf-8"))
    return text.replace(" ", "\u2581")


def count_tokens(text: str, model: str, vocabulary: set[str]) -> int:
    """Tokens of `text` by greedy longest match; a character no piece starts with counts as one token."""
    spelled, at, count = _spelled(text, model), 0, 0
    while at < len(spelled):
        at += next((n for n in range(min(LONGEST, len(spelled) - at), 1, -1) if spelled[at : at + n] in vocabulary), 1)
        count += 1
    return count


def chars_per_token(model_file: str | None, texts: list[str]) -> tuple[float | None, str]:
    """The ratio over `texts` with the vocabulary of `model_file`, and where it came from; None when it cannot be read."""
    if model_file is None or not texts:
        return None, "no GGUF model file read"
    try:
        meta = gguf_metadata(model_file, lambda key: key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens"))
    except (OSError, ValueError, KeyError, struct.error) as exc:
        return None, f"the GGUF vocabulary was not read ({type(exc).__name__}: {exc})"
    model, pieces = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.tokens")
    if model not in (SENTENCEPIECE, BYTE_LEVEL) or not pieces:
        return None, f"a {model} vocabulary, which the estimate does not read"
    vocabulary = set(pieces)
    tokens = sum(count_tokens(text, str(model), vocabulary) for text in texts)
    return sum(map(len, texts)) / tokens, f"read: greedy match over the task's prompts with the GGUF's {model} vocabulary"
