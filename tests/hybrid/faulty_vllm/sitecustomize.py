"""TEST AID ONLY: turns a vLLM install into a faulty build that forgets the cached Mamba state.

On this folder's PYTHONPATH (the `faulty` variant of configs in tests/hybrid), every Python
process of the vLLM server imports this module at start-up. It changes one thing, in vLLM's own
Mamba path: `vllm.v1.worker.mamba_utils.preprocess_mamba`, the step that restores a request's
Mamba state (conv and SSM) from the prefix cache's block when the request starts with cached
tokens (`--mamba-cache-mode align`). After the restore, the patch zeroes the request's running
state, so a prefill that hits the cache runs its suffix from a zeroed state: the seed's bug
(sglang#29330, where `has_initial_states` was masked off on cache hits). Requests without a
cache hit, later chunks of a chunked prefill, decode steps and attention's KV cache are untouched,
so cold requests compute exactly what the real build computes.

Never install this anywhere but a test's PYTHONPATH.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

# tests/, for the shared helper (appended: nothing of the engine's can be shadowed by it).
sys.path.append(str(Path(__file__).resolve().parents[2]))
from patch_on_import import patch_on_import  # noqa: E402

TARGET = "vllm.v1.worker.mamba_utils"


def _patch(module) -> None:
    original = module.preprocess_mamba
    signature = inspect.signature(original)

    def preprocess_mamba_forgetting_cache_hits(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        a = bound.arguments
        state_idx, requests = a["mamba_state_idx"], a["requests"]
        # The original first drops finished, preempted and resumed requests; so must we, to see
        # which requests start now: those with no running state yet.
        module.cleanup_mamba_state_idx(a["scheduler_output"], state_idx)
        hits = [r for r in a["input_batch"].req_ids if r not in state_idx and requests[r].num_computed_tokens > 0]
        result = original(*args, **kwargs)
        groups = a["kv_cache_config"].kv_cache_groups
        context = a["forward_context"]
        for req_id in hits:
            for gid in a["copy_bufs"].mamba_group_ids:
                block = requests[req_id].block_ids[gid][state_idx[req_id]]
                for layer in groups[gid].layer_names:
                    for state in context[layer].kv_cache:
                        state[block].zero_()
        return result

    module.preprocess_mamba = preprocess_mamba_forgetting_cache_hits
    print(f"[faulty build] {TARGET}.preprocess_mamba zeroes the restored Mamba state on prefix-cache hits", file=sys.stderr)


patch_on_import(TARGET, _patch)
