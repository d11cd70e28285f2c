"""What the probe sends and when it fails. Meant to join the gate policy file as its `probe` section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalctl.config_files import read_yaml
from evalctl.errors import BadInput


class ProbePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(16, gt=0, description="Greedy tokens per generation: a lost prefix shows in the first few.")
    top_logprobs: int = Field(5, ge=0, le=20, description="Alternatives per position asked for (0: compare tokens only).")
    questions_per_bin: int = Field(1, ge=1, description="Test questions probed per prefix-length bin.")
    min_prefix_tokens: int = Field(16, ge=1, description="Shorter shared prefixes (e.g. 0-shot) are not probed.")
    chunk_offsets: list[int] = Field(
        default_factory=lambda: [-64, 64],
        description="Synthetic prefixes this many tokens below/above the engine's prefill chunk size, when the engine reports one.",
    )
    prefix_tokens: list[int] = Field(default_factory=list, description="Further synthetic prefix lengths (tokens).")
    max_prefix_tokens: int = Field(4096, gt=0, description="Synthetic prefixes longer than this are skipped.")
    max_divergence: float = Field(
        0.02,
        ge=0,
        description="Largest tolerated excess of mean Jensen-Shannon divergence (nats) of the top-k distributions, "
        "cold vs warm over cold vs cold, at the positions where both saw the same tokens.",
    )
    max_mismatch_excess: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Largest tolerated excess of the share of prompts whose warm tokens differ from cold, over the "
        "cold-vs-cold share; the verdict's only rule when the server returns no logprobs.",
    )


def load_probe_policy(path: Path | None, overrides: dict[str, Any]) -> ProbePolicy:
    """The policy in the YAML file `path` (top level, or a gate policy's `probe:` section), fields in `overrides` set over it."""
    data: Any = {}
    if path is not None:
        loaded = read_yaml(path, "probe policy")
        data = loaded.get("probe", loaded)
        if not isinstance(data, dict):
            raise BadInput(f"probe policy {path}: `probe:` must be a mapping")
    try:
        return ProbePolicy.model_validate({**data, **{k: v for k, v in overrides.items() if v is not None}})
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BadInput(f"invalid probe policy: {fields}") from None
