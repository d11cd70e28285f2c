"""A GGUF file's header read without `gguf` (`gguf_metadata`), and characters per token of a task's text estimated
with the model's vocabulary from it: the `hunt` workload aims at token counts (a window, a micro-batch) but writes text,
so this ratio decides where its turns end and its returns land.

Greedy longest match over the vocabulary is not the model's tokenizer (BPE merges, SentencePiece scores), but it lands
near it: on prefix-recall prompts Gemma-3's vocabulary gives 1.67 characters a token where llama.cpp counts 1.63.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

# How a vocabulary writes a space: SentencePiece's "▁"; byte-level BPE (GPT-2's scheme) maps every byte to a printable
# character, a space to "Ġ".
SENTENCEPIECE, BYTE_LEVEL = "llama", "gpt2"
LONGEST = 32  # longer pieces are rare in prose and numbers; capping the match keeps an estimate of 10k characters fast
# GGUF metadata value types (the GGUF spec): fixed sizes by type id; 8 a string, 9 an array.
_GGUF_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_metadata(path: str, wanted: Callable[[str], bool]) -> dict[str, object]:
    """The GGUF header's values whose keys `wanted` accepts: scalars, strings and arrays of strings (a vocabulary); the
    rest is skipped, not read."""
    found: dict[str, object] = {}
    with open(path, "rb") as f:

        def read(fmt: str):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def value(kind: int, key: str | None):  # key None: skipped
            if kind == 8:
                size = read("Q")
                return f.read(size).decode("utf-8", "replace") if key else f.seek(size, 1)
            if kind != 9:
                return read(_GGUF_FIXED[kind]) if key else f.seek(struct.calcsize("<" + _GGUF_FIXED[kind]), 1)
            item, count = read("I"), read("Q")
            if key and item != 8:
                raise ValueError(f"{key}: an array of type {item}, not of strings")
            if not key and item in _GGUF_FIXED:
                return f.seek(struct.calcsize("<" + _GGUF_FIXED[item]) * count, 1)
            return [value(item, key) for _ in range(count)]

        if f.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        f.seek(12, 1)  # the version (4 bytes) and the tensor count (8)
        for _ in range(read("Q")):
            key = f.read(read("Q")).decode("utf-8", "replace")
            if wanted(key):
                found[key] = value(read("I"), key)
            else:
                value(read("I"), None)
    return found


# GPT-2's printable stand-in for every byte: printable Latin-1 bytes stand for themselves, the rest from U+0100 on.
_PRINTABLE = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
BYTE_CHARS = {b: chr(b) for b in _PRINTABLE} | {b: chr(0x100 + i) for i, b in enumerate(b for b in range(256) if b not in _PRINTABLE)}


def count_tokens(text: str, model: str, vocabulary: set[str]) -> int:
    """Tokens of `text` by greedy longest match; a character no piece starts with counts as one token."""
    if model == BYTE_LEVEL:
        spelled = "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))
    else:
        spelled = text.replace(" ", "\u2581")
    at, count = 0, 0
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
