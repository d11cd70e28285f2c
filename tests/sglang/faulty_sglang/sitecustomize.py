"""TEST AID ONLY: turns an SGLang install into a faulty build whose radix-cache hits reuse the wrong KV slots.

On this folder's PYTHONPATH (the `faulty` variant in tests/sglang), every Python process of the
SGLang server imports this module at start-up. It changes one thing, in SGLang's own prefix-cache
path: `sglang.srt.mem_cache.allocation._prefix_kv_indices`, where a new request reads the KV slots
of its matched prefix off the radix tree before its row is written. The patch shifts those slots
by a page (EVALCTL_FAULTY_SHIFT tokens, default 16), rotating the last page to the front: token i
of a cached prefix then attends through the keys and values of token i - 16. The slots are the
same set (nothing is freed twice); only their order is wrong. Requests without a cache hit,
later chunks of a chunked prefill (they read their own row), decode steps and the tree itself are
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

TARGET = "sglang.srt.mem_cache.allocation"
SHIFT = int(os.environ.get("EVALCTL_FAULTY_SHIFT", "16"))


def _patch(module) -> None:
    original = module._prefix_kv_indices

    def prefix_kv_indices_shifted(batch, req):
        indices = original(batch, req)
        # A hit read off the tree (a row already held is the request's own, written earlier).
        if not req.kv.holds_kv and len(indices) > SHIFT:
            import torch

            indices = torch.roll(indices, SHIFT)
        return indices

    module._prefix_kv_indices = prefix_kv_indices_shifted
    print(f"[faulty build] {TARGET}._prefix_kv_indices shifts cached prefix KV slots by {SHIFT} tokens", file=sys.stderr)


patch_on_import(TARGET, _patch)
