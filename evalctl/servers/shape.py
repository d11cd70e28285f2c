"""A served model's shape, for the `hunt` workload (`tasks.hunt`): the token counts where a server saves and restores state.

Read without launching anything, when the config is loaded: the model file's metadata (a GGUF's
`<arch>.attention.sliding_window`) and the profile's engine settings (llama.cpp's slots, a
`--param n_ubatch=N`). What cannot be read is assumed from the engine's documented default and
marked so; every figure's origin goes into the run's config (`hunt.shape`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evalctl.schema import ServerProfile
from evalctl.servers.bundled import resolve_model_path

# llama.cpp's defaults (common.h): a prompt is computed in micro-batches of n_ubatch tokens.
LLAMACPP_UBATCH = 512
# vLLM's KV block on CPU and SGLang's page: below a turn, so a hunt cannot aim at them (recorded only).
KV_BLOCK = {"vllm": 16, "sglang": 1}


@dataclass
class Shape:
    boundaries: dict[str, int] = field(default_factory=dict)
    slots: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, value: int | None, source: str) -> None:
        if value:
            self.boundaries[name] = int(value)
            self.sources[name] = source


def _gguf_sliding_window(path: str) -> tuple[int | None, str]:
    """The model's SWA window from its GGUF metadata (None when it has none), and what was read."""
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path)
        arch_field = reader.get_field("general.architecture")
        arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
        window = reader.get_field(f"{arch}.attention.sliding_window")
        if window is None:
            return None, f"read: {arch} GGUF has no {arch}.attention.sliding_window"
        return int(window.parts[window.data[0]][0]), f"read: GGUF {arch}.attention.sliding_window"
    except Exception as exc:  # an unreadable or absent file: assume no SWA, and say why
        return None, f"assumed none: GGUF metadata not read ({type(exc).__name__}: {exc})"


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
            window, source = _gguf_sliding_window(path)
            shape.sources["swa_window"] = source
            shape.add("swa_window", window, source)
            # llama.cpp keeps window + ubatch SWA cells: a checkpoint made below that holds from position 0.
            shape.add("swa_cache", window and window + shape.boundaries["ubatch"], "derived: swa_window + ubatch")
    else:
        shape.slots, shape.sources["slots"] = 1, f"assumed: 1 ({engine} slots are not fixed)"
        shape.add("kv_block", KV_BLOCK.get(engine), f"assumed: {engine}'s default block")
        shape.add("chunk", 512, "assumed: a 512-token prefill chunk to cross")
    return shape
