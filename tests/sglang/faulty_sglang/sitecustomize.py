"""TEST AID ONLY: turns an SGLang install into a faulty build whose radix-cache hits reuse the wrong KV slots.

On this folder's PYTHONPATH (the `faulty` variant in tests/sglang), every Python process of the
SGLang server imports this module at start-up. It changes one thing, in SGLang's own prefix-cache
code (0.5.14, the version scripts/install-sglang-cpu.sh ships): `RadixCache.match_prefix`, as a
request looks up its cached prefix (the calls that carry the request). The KV slots of the match
come back shifted by a page (EVALCTL_FAULTY_SHIFT tokens, default 16), the last page rotated to
the front: token i of a cached prefix then attends through the keys and values of token i - 16.
The slots are the same set (nothing is freed twice), only their order is wrong. Requests without
a cache hit, decode steps and the tree itself are untouched, so cold requests compute exactly
what the real build computes.

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
SHIFT = int(os.environ.get("EVALCTL_FAULTY_SHIFT", "16"))


def _patch(module) -> None:
    original = module.RadixCache.match_prefix

    def match_prefix_shifted(self, params):
        result = original(self, params)
        indices = result.device_indices
        if getattr(params, "req", None) is not None and len(indices) > SHIFT:
            import torch

            result = result._replace(device_indices=torch.roll(indices, SHIFT))
        return result

    module.RadixCache.match_prefix = match_prefix_shifted
    print(f"[faulty build] {TARGET}.RadixCache.match_prefix shifts a hit's KV slots by {SHIFT} tokens", file=sys.stderr)


patch_on_import(TARGET, _patch)
