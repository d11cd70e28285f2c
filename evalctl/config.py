"""Sweep configuration: pydantic models, model aliases in `configs/`, CLI overrides.

A config names *what* to measure (task, shots, cache modes, passes) and *where*
(server profiles x variants). Everything downstream reads the resolved model;
nothing re-reads YAML.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"
DATA_DIR_ENV = "EVALCTL_DATA_DIR"


class ConfigError(ValueError):
    """A config that cannot be used; the message names the cause."""


class CacheMode(str, Enum):
    on = "on"
    off = "off"


class Engine(str, Enum):
    llamacpp = "llamacpp"
    sglang = "sglang"
    vllm = "vllm"
    external = "external"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GenerationConfig(_Strict):
    max_tokens: int = Field(256, gt=0, description="Completion budget per question.")
    temperature: float = Field(0.0, ge=0.0)
    seed: int = 1234
    stop: list[str] | None = Field(None, description="Stop strings; default: the task's own.")


class ServerProfile(_Strict):
    """One way of serving the model (engine, hardware, parallelism, precision)."""

    name: str
    engine: Engine = Engine.llamacpp
    model_path: str = Field(..., description="Weights path or hub id; `bundled:smollm2-135m` for the CPU model.")
    url: str | None = Field(None, description="Base URL, for engine `external` only.")
    port: int | None = Field(None, ge=1, le=65535, description="Fixed port; default: a free one.")
    host: str = "127.0.0.1"
    tp: int = Field(1, ge=1)
    dtype: str | None = None
    quantization: str | None = None
    gpu: str | None = Field(None, description="GPU label, for the record (e.g. H100, B200).")
    context_length: int = Field(8192, gt=0, description="Context per request slot.")
    parallel: int = Field(4, ge=1, description="Concurrent request slots (llama.cpp).")
    threads: int | None = Field(None, ge=1, description="CPU threads (llama.cpp); default: all cores.")
    startup_timeout_s: float = Field(300.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _url_only_for_external(self) -> ServerProfile:
        if self.engine is Engine.external and not self.url:
            raise ValueError(f"server profile {self.name!r}: engine 'external' needs `url`")
        if self.engine is not Engine.external and self.url:
            raise ValueError(f"server profile {self.name!r}: `url` is only for engine 'external'")
        return self


class Variant(_Strict):
    """An engine build to A/B (baseline vs patched). The default variant is the installed one."""

    name: str = "default"
    python: str | None = Field(None, description="Interpreter of the build's venv.")
    command_prefix: list[str] = Field(default_factory=list)
    extra_args: list[str] = Field(default_factory=list)
    git_revision: str | None = None


class SweepConfig(_Strict):
    model: str = Field(..., description="Model label used in run ids and history.")
    task: Literal["gsm8k"] = "gsm8k"
    shots: list[int] = Field(default_factory=lambda: list(range(8, 21, 2)))
    fewshot: Literal["shared", "sampled"] = "shared"
    cache: list[CacheMode] = Field(default_factory=lambda: [CacheMode.on, CacheMode.off])
    limit: int | None = Field(None, description="Questions per cell; default: the whole test split.")
    passes: int = Field(1, ge=1, le=10, description="Warm passes per cell without a flush between.")
    concurrency: int = Field(4, ge=1, le=1024)
    request_timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(3, ge=0)
    data_dir: Path | None = Field(None, description="Local copy with train.jsonl/test.jsonl; default: the hub.")
    output_dir: Path = Path("results")
    probe: bool = Field(False, description="Run the cache-consistency probe on each cache-on server before its cells (probe.json).")
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    servers: list[ServerProfile]
    variants: list[Variant] = Field(default_factory=lambda: [Variant()])

    @field_validator("shots")
    @classmethod
    def _shots_valid(cls, shots: list[int]) -> list[int]:
        if not shots:
            raise ValueError("shots must list at least one count")
        bad = [s for s in shots if s < 0]
        if bad:
            raise ValueError(f"shot counts must be >= 0, got {bad}")
        return sorted(dict.fromkeys(shots))

    @field_validator("cache", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `on`/`off` as a boolean.
        if isinstance(value, list):
            return [{True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v for v in value]
        return value

    @field_validator("cache")
    @classmethod
    def _cache_nonempty(cls, modes: list[CacheMode]) -> list[CacheMode]:
        if not modes:
            raise ValueError("cache must list at least one mode (on, off)")
        return list(dict.fromkeys(modes))

    @field_validator("limit")
    @classmethod
    def _limit_positive(cls, limit: int | None) -> int | None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be >= 1 (or omitted for all questions), got {limit}")
        return limit

    @model_validator(mode="after")
    def _unique_names(self) -> SweepConfig:
        for kind, names in (("server profile", [s.name for s in self.servers]), ("variant", [v.name for v in self.variants])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {kind} names: {dupes}")
        if not self.servers:
            raise ValueError("servers must list at least one server profile")
        return self

    def resolved_data_dir(self) -> Path | None:
        if self.data_dir is not None:
            return self.data_dir
        env = os.environ.get(DATA_DIR_ENV)
        return Path(env) if env else None


def known_aliases() -> list[str]:
    return sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml") if not p.stem.startswith("gate"))


def alias_path(name: str) -> Path:
    path = CONFIGS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(known_aliases()) or "(none)"
        raise ConfigError(f"unknown model alias {name!r}; known: {known}")
    return path


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return data


def _format_validation(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"  {where}: {msg}")
    return "\n".join(lines)


def load_config(*, model: str | None = None, config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> SweepConfig:
    """Resolve `--model` (alias) or `--config` (file), then apply CLI overrides."""
    if (model is None) == (config_file is None):
        raise ConfigError("give exactly one of --model NAME or --config FILE")
    path = alias_path(model) if model else Path(config_file)  # type: ignore[arg-type]
    data = _read_yaml(path)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        # Dotted keys ("generation.max_tokens") reach into nested sections.
        *parents, leaf = key.split(".")
        target = data
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(f"config field {part!r} must be a mapping to set {key}")
        target[leaf] = value
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, str(path))) from None


def with_external_url(config: SweepConfig, url: str) -> SweepConfig:
    """Replace the profiles by one already-running server (`--url`)."""
    external = ServerProfile(name="external", engine=Engine.external, url=url.rstrip("/"), model_path=config.servers[0].model_path)
    return config.model_copy(update={"servers": [external], "variants": [Variant()]})
