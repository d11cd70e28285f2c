"""TEST AID ONLY: turns an SGLang install into a faulty build whose radix-cache hits read the wrong KV slots.

On this folder's PYTHONPATH (the `faulty` variant in tests/sglang), every Python process of the
SGLang server imports this module at start-up. It changes one thing, in SGLang's own prefix-cache
code (0.5.14, the version scripts/install-sglang-cpu.sh ships): `RadixCache.match_prefix`, as a
request looks up its cached prefix (the calls that carry the request). The KV slots of the match
are looked up as if through a page table indexed modulo the page size instead of divided by it
(a page of EVALCTL_FAULTY_PAGE tokens, default 16): every cached token past the first page reads
the slots of the first page again. Reordering the slots would not do: attention over the prefix
sees a set of keys, each rotated for its own position when it was written, so only a different
set shows. These slots are the tree's own and locked (read, never written or freed), so the tree
and the pool stay sound. Requests without a cache hit, decode steps and the tree itself are
untouched, so cold requests compute exactly what the real build computes.

Never install this anywhere but a test's PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# tests/, for the shared helper (appended: nothing of the engine's can be shadowed by it).
sys.path.append(str(Path(__file__).resolve().parents[2]))
from patch_on_import import patch_on_import  # noqa: E402

TARGET = "sglang.srt.mem_cache.radix_cache"
PAGE = int(os.environ.get("EVALCTL_FAULTY_PAGE", "16"))


def _patch(module) -> None:
    original = module.RadixCache.match_prefix

    def match_prefix_wrapped(self, params):
        result = original(self, params)
        indices = result.device_indices
        if getattr(params, "req", None) is not None and len(indices) > PAGE:
            import torch

            result = result._replace(device_indices=indices[torch.arange(len(indices)) % PAGE])
        return result

    module.RadixCache.match_prefix = match_prefix_wrapped
    print(f"[faulty build] {TARGET}.RadixCache.match_prefix wraps a hit's KV slots at {PAGE} tokens", file=sys.stderr)


patch_on_import(TARGET, _patch)
