"""What an engine must say about itself, and the launch description it produces."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field, field_validator, model_validator

from evalctl import venvs
from evalctl.errors import ConfigError
from evalctl.schema import CacheMode, EngineSettings, ServerProfile, Variant, expand_text
from evalctl.servers.bundled import convert, converted_name, converted_path


@dataclass(frozen=True)
class LaunchSpec:
    """A server command line, ready to run: argv plus environment additions."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchRecord:
    """What a launcher wrote about the server it started: `info` merged over the server's own
    (`version` then names the build that really runs), and the requested settings that build lacks."""

    info: dict[str, Any] = field(default_factory=dict)
    unset_settings: dict[str, str] = field(default_factory=dict)  # setting -> why it was not set


def optional_flags(pairs: dict[str, object]) -> list[str]:
    """`--flag value` for each value that is set; a True boolean is a bare flag, False/None omit it."""
    argv: list[str] = []
    for flag, value in pairs.items():
        if value is None or value is False:
            continue
        argv += [flag] if value is True else [flag, str(value)]
    return argv


# Longer setting values (chat templates, launch commands) are kept as a digest: a diff still shows a change.
MAX_SETTING_CHARS = 200


def flat_settings(data: dict, skip: Iterable[str] = ()) -> dict[str, object]:
    """Nested settings as one level of `a.b.c` keys with JSON scalars (lists as JSON text), for the manifest
    and diffs; `skip` leaves out top-level keys whose values change on every start (random markers)."""
    out: dict[str, object] = {}
    for key, value in data.items():
        if key in skip:
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in flat_settings(value).items()})
            continue
        if isinstance(value, (list, tuple)):
            value = json.dumps(value, default=str)
        elif value is not None and not isinstance(value, (bool, int, float, str)):
            value = str(value)
        if isinstance(value, str) and len(value) > MAX_SETTING_CHARS:
            value = f"sha256:{hashlib.sha256(value.encode()).hexdigest()[:12]} ({len(value)} chars)"
        out[str(key)] = value
    return out


class GpuEngineSettings(EngineSettings):
    """Settings SGLang and vLLM share, each engine's flag for them in its `FLAGS`; None leaves the engine's default."""

    # Setting -> the engine's flag, in command-line order (`flags`): the one place a setting meets its engine.
    FLAGS: ClassVar[dict[str, str]] = {}
    # Settings only the engine's CPU build (`device: cpu`) takes.
    CPU_ONLY: ClassVar[tuple[str, ...]] = ()

    tp: int = Field(1, ge=1)
    dtype: str | None = None
    quantization: str | None = None
    chunked_prefill_size: int | None = Field(None, gt=0, description="SGLang --chunked-prefill-size, vLLM --max-num-batched-tokens.")
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description="SGLang --mem-fraction-static, vLLM --gpu-memory-utilization.")
    max_running_requests: int | None = Field(
        None,
        ge=1,
        description="SGLang --max-running-requests, vLLM --max-num-seqs; default: a concurrency sweep's highest level, else the engine's.",
    )
    random_seed: int | None = Field(None, description="SGLang --random-seed, vLLM --seed; default: generation.seed.")
    mamba: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Mamba options passed through as --mamba-<key> VALUE, e.g. {radix_cache_strategy: extra_buffer}."
    )
    devices: list[str] | None = Field(None, description="Pin these GPU ids (as many as tp); default: the next free contiguous set.")
    device: Literal["cuda", "cpu"] = "cuda"

    @field_validator("devices", mode="before")
    @classmethod
    def _device_ids_as_text(cls, value: object) -> object:
        return [str(v) for v in value] if isinstance(value, list) else value

    @field_validator("mamba")
    @classmethod
    def _mamba_keys(cls, options: dict) -> dict:
        bad = [k for k in options if not re.fullmatch(r"[a-z0-9_]+", k)]
        if bad:
            raise ValueError(f"mamba option names are snake_case without the 'mamba_' prefix, got {bad}")
        return options

    @field_validator("devices")
    @classmethod
    def _devices_match_tp(cls, devices: list[str] | None, info) -> list[str] | None:
        tp = info.data.get("tp", 1)
        if devices is not None and len(devices) != tp:
            raise ValueError(f"devices lists {len(devices)} GPUs but tp is {tp}")
        return devices

    @model_validator(mode="after")
    def _cpu_only(self) -> GpuEngineSettings:
        used = [f for f in self.CPU_ONLY if getattr(self, f) is not None]
        if self.device != "cpu" and used:
            raise ValueError(f"{', '.join(used)} apply to device cpu only")
        return self

    def gpus_needed(self) -> int:
        return self.tp if self.device == "cuda" else 0

    def pinned_devices(self) -> list[str] | None:
        return self.devices

    def unpinned(self) -> GpuEngineSettings:
        return self.model_copy(update={"devices": None})

    def seeded(self, seed: int) -> GpuEngineSettings:
        return self if self.random_seed is not None else self.model_copy(update={"random_seed": seed})

    def with_slots(self, requests: int) -> GpuEngineSettings:
        return self if self.max_running_requests is not None else self.model_copy(update={"max_running_requests": requests})

    def flags(self) -> list[str]:
        """`FLAGS`' settings as `--flag value` (a bare flag for True; left out when None or False)."""
        return optional_flags({flag: getattr(self, name) for name, flag in self.FLAGS.items()})

    def mamba_flags(self) -> list[str]:
        return optional_flags({f"--mamba-{key.replace('_', '-')}": value for key, value in self.mamba.items()})


def interpreter(profile: ServerProfile, variant: Variant) -> str | None:
    """The Python the engine runs under: the variant's build (its venv, or the venv made for its `pip`), else the
    profile's ($VAR expanded now: a profile not launched needs none); None: evalctl's own."""
    if variant.pip:
        return str(venvs.python_of(variant.pip))
    if variant.python:
        return variant.python
    return expand_text(profile.python, f"server profile {profile.name!r}: python") if profile.python else None


class EngineAdapter:
    """Engine-specific facts (the process lifecycle is `servers.process`); a subclass in the engine registry is the engine
    its `name` names. The base class itself is a server at a URL no engine recognises: OpenAI only, no cache switch or flush."""

    name: ClassVar[str | None] = None  # None: an engine evalctl does not know
    Settings: ClassVar[type[EngineSettings]] = EngineSettings
    # GET routes and tests of their JSON body that identify this engine behind a URL (servers.detect), tried in
    # ascending `detect_rank` across engines.
    detect_routes: ClassVar[tuple[tuple[str, Callable[[dict], bool]], ...]] = ()
    detect_rank: ClassVar[int] = 100
    health_path = "/health"
    # The highest HTTP port the engine accepts (it may derive other ports from it).
    highest_port: ClassVar[int] = 65535
    # Consecutive ports a launch binds from its HTTP port on (the engine's argv names the others).
    ports_needed: ClassVar[int] = 1
    # Engines that omit `cached_tokens` when it is zero report it as this (None: missing means not reported).
    cached_tokens_if_missing: int | None = None
    # Streamed requests ask for usage in the final chunk (`stream_options.include_usage`).
    stream_usage = True
    # Prometheus sample name (counters with their `_total` suffix) -> manifest key, scraped before and after each cell.
    # The counter of prompt tokens served from the prefix cache must map to CACHED_TOKENS: the cache-engaged check reads only it.
    metrics: dict[str, str] = {}
    # Counters of `metrics` the engine does not expose at all until their first increment: absent, they count 0.
    counters_from_zero: tuple[str, ...] = ()

    def engine_argv(self, python: str, profile: ServerProfile, cache: CacheMode, port: int | str, workdir: str) -> list[str]:
        """The engine's own command."""
        raise NotImplementedError

    def cores(self, profile: ServerProfile) -> int | None:
        """The CPU cores a launch of `profile` keeps busy, where it runs on the CPU alone and says how many (its threads);
        None otherwise: such launches run one at a time (`execution.side_by_side`)."""
        return None

    def preflight(self, profile: ServerProfile, variant: Variant) -> None:
        """Check (and fetch or convert) what a launch needs before the run folder exists; ConfigError if it cannot."""

    def engine_env(self, profile: ServerProfile) -> dict[str, str]:
        """Environment the engine needs for this profile (before the profile's and variant's own `env`)."""
        return {}

    def launch_spec(
        self, profile: ServerProfile, variant: Variant, cache: CacheMode, port: int | str, workdir: str, devices: Sequence[str] = ()
    ) -> LaunchSpec:
        """The variant's runner and interpreter around the engine's command, extra args last (so they override),
        environment merged engine < profile < variant. `port` may be a placeholder (`evalctl servers show`)."""
        # Behind a container runner, evalctl's own interpreter path means nothing.
        python = interpreter(profile, variant) or ("python3" if variant.command_prefix else sys.executable)
        argv = self.engine_argv(python, profile, cache, port, workdir)
        env = {**self.engine_env(profile), **profile.env, **variant.env}
        if devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        return LaunchSpec(argv=[*variant.command_prefix, *argv, *profile.extra_args, *variant.extra_args], env=env)

    def launch_record(self, workdir: Path) -> LaunchRecord:
        """What this engine's launcher recorded in the launch's `workdir` once the server is healthy; empty by default."""
        return LaunchRecord()

    def request_model(self, model_path: str) -> str:
        """The model name requests carry (and a converted model is served under) for a profile's `model_path`."""
        return model_path

    def request_fields(self, cache: CacheMode) -> dict:
        """Extra JSON fields for every completion request."""
        return {}

    def fresh_fields(self, cache: CacheMode) -> dict:
        """Extra JSON fields made anew for every attempt of a request (a per-request cache salt); default none."""
        return {}

    def cold_per_request(self) -> bool:
        """Whether a request can be sent cold on a cache-on server (a field that bypasses or salts the cache)."""
        return bool(self.request_fields(CacheMode.off) or self.fresh_fields(CacheMode.off))

    def prewarm_fields(self, profile: ServerProfile) -> list[dict]:
        """One dict of extra fields per prewarm request needed to seed the cache."""
        return [{}]

    def flush(self, http: httpx.Client) -> bool:
        """Reset the prefix cache; False when the engine offers no way to."""
        return False

    def server_info(self, http: httpx.Client) -> dict:
        """Version and `settings`: the configuration the running server resolved (its defaults filled in), flat;
        of a server whose engine evalctl does not know, the models it serves."""
        try:
            return {"models": [m.get("id") for m in http.get("/v1/models").json().get("data", [])]}
        except (httpx.HTTPError, ValueError, AttributeError):
            return {}

    def scrape_metrics(self, http: httpx.Client) -> dict[str, float]:
        """The `metrics` this engine exports, from its Prometheus `/metrics`: counters summed over label sets (ranks,
        cache sources), gauges averaged; {} when it lists none."""
        if not self.metrics:
            return {}
        response = http.get("/metrics")
        response.raise_for_status()
        values: dict[str, list[float]] = {}
        kinds: dict[str, str] = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                key = self.metrics.get(sample.name)
                if key is not None:
                    values.setdefault(key, []).append(sample.value)
                    kinds[key] = family.type
        scraped = {key: sum(v) if kinds[key] == "counter" else sum(v) / len(v) for key, v in values.items()}
        return {**{self.metrics[name]: 0.0 for name in self.counters_from_zero}, **scraped}

    def prefill_chunk_tokens(self, http: httpx.Client, profile: ServerProfile | None) -> int | None:
        """Tokens the engine prefills in one step (its chunked-prefill size); None when unknown."""
        return None


class GpuEngineAdapter(EngineAdapter):
    """SGLang and vLLM: a bundled model served as its converted folder, and cache-off requests salted."""

    install_script: ClassVar[str]  # makes the engine's CPU venv, whose interpreter converts a bundled model
    model_flag: ClassVar[str]

    def preflight(self, profile: ServerProfile, variant: Variant) -> None:
        # A converted bundled model (bundled:smollm2-135m-hf) is made once by the engine venv's interpreter.
        name = converted_name(profile.model_path)
        if name is None:
            return
        python = interpreter(profile, variant)
        if not python:
            raise ConfigError(
                f"server profile {profile.name!r}: bundled:{name} is converted by the {profile.engine} venv's interpreter "
                f"(torch, transformers): set the profile's (or the variant's) `python`; {self.install_script} makes the venv"
            )
        convert(name, python)

    def model_args(self, profile: ServerProfile) -> list[str]:
        """`model_flag PATH`; a converted bundled model is its folder in the cache, served under the name requests carry."""
        name = converted_name(profile.model_path)
        if name is None:
            return [self.model_flag, profile.model_path]
        return [self.model_flag, str(converted_path(name)), "--served-model-name", self.request_model(profile.model_path)]

    def fresh_fields(self, cache: CacheMode) -> dict:
        """Cache off: a salt of the request's own, which enters the hash of its cached prefix (vLLM's blocks,
        SGLang's radix tree), so nothing cached matches it and nothing later reuses what it leaves: `sweep --url
        ... --cache off` is cold too. New for every attempt, so a retry finds nothing its failed try cached."""
        return {"cache_salt": secrets.token_urlsafe(24)} if cache is CacheMode.off else {}
