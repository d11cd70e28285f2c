"""Generated documents of the prefix-recall task: records in a prefix, questions about them.

lm-eval loads this file by path (prefix-recall.yaml's `custom_dataset`), so it imports nothing from evalctl.
The same (records, mode, seed) gives the same prompts in every cell and run; docs/prefix-recall.md says how
`shared` and `sampled` lay the questions over the records (`documents`).
"""

from __future__ import annotations

import itertools
import random

import datasets

# Record and question lines, chosen on SmolLM2-135M (README, "prefix-recall"): a
# `name: number` list read back by `name:`, after an instruction, is what it copies best.
INSTRUCTION = "Here is a list of keys and their values. Remember them; you will be asked for one.\n\n"
RECORD = "{key}: {value}\n"
QUESTION = "\n{key}:"
# Keys are made-up words of three consonant-vowel syllables ("bokamu"): each is a few
# distinct tokens the model can match, where letter-digit codes all look alike to it.
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
POSITIONS = ("start", "middle", "end")


def _van_der_corput(n: int) -> list[int]:
    """Every index in 0..n-1 once, ordered so that any first m are spread evenly over the range."""
    order: dict[int, None] = {}
    for j in itertools.count():
        if len(order) == n:
            return list(order)
        # j's base-2 radical inverse: its binary digits mirrored behind the point
        order.setdefault(int(int(f"{j:b}"[::-1], 2) / 2 ** j.bit_length() * n))


def spread_order(n: int) -> list[int]:
    """Every record index once: start, middle and end in turn, each third spread evenly within (so any first m
    questions split equally over the thirds, to within one)."""
    thirds = [[i for i in _van_der_corput(n) if position_bin(i, n) == p] for p in POSITIONS]
    return [i for turn in itertools.zip_longest(*thirds) for i in turn if i is not None]


def position_bin(index: int, n: int) -> str:
    """start, middle or end: the third of the prefix the record sits in."""
    return POSITIONS[min(2, index * 3 // n)]


def make_records(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """n records with distinct made-up word keys and three-digit values.

    Values start at 200: SmolLM2-135M's guess when it finds no key is "100", so a value
    from 100 to 199 could be right by chance.
    """
    keys: dict[str, str] = {}
    while len(keys) < n:
        key = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(3))
        keys.setdefault(key, str(rng.randint(200, 999)))
    return list(keys.items())


def _docs(records: list[tuple[str, str]], asked: list[int]) -> list[dict]:
    """One question document per asked record index, all over the same prefix of `records`."""
    lines = [RECORD.format(key=k, value=v) for k, v in records]
    prefix = INSTRUCTION + "".join(lines)
    starts = list(itertools.accumulate(map(len, lines), initial=len(INSTRUCTION)))
    docs = []
    for index in asked:
        key, value = records[index]
        question = QUESTION.format(key=key)
        docs.append(
            {
                "prompt": prefix + question,
                "question": question.strip(),
                "value": value,
                "record_index": index,
                "records": len(records),
                "position": position_bin(index, len(records)),
                # the asked value's first character: its line ends "<value>\n"
                "answer_char_offset": starts[index + 1] - len(value) - 1,
            }
        )
    return docs


def documents(records: int, mode: str, seed: int, questions: int | None = None) -> list[dict]:
    """The task's test documents in spread order: one per record, or `questions` of them when more (`shared`: question j
    asks list j // records, each list cached once and read back; `sampled`: question j its own prefix, from (seed, j))."""
    if records < 1:
        raise ValueError(f"prefix-recall needs at least one record per prefix, got {records}")
    if mode not in ("shared", "sampled"):
        raise ValueError(f"prefix-recall mode must be shared or sampled, got {mode!r}")
    order, count = spread_order(records), max(records, questions or 0)
    draw = f"prefix-recall:{seed}:{records}"
    if mode == "shared":
        # The first list is drawn as it always was, so a cell of at most `records` questions keeps its prompts.
        lists = [draw] + [f"{draw}:list{k}" for k in range(1, -(-count // records))]
        return [doc for name in lists for doc in _docs(make_records(random.Random(name), records), order)][:count]
    return [_docs(make_records(random.Random(f"{draw}:{j}"), records), [order[j % records]])[0] for j in range(count)]


def dataset(records: int, mode: str = "shared", seed: int = 1234, questions: int | None = None, **_: object) -> datasets.DatasetDict:
    """lm-eval's `custom_dataset` hook: the test split for one prefix size (metadata gives the arguments)."""
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(documents(records, mode, seed, questions))})
