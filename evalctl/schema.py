"""The sweep config's schema: pydantic models, and nothing that looks anything up.

A config names *what* to measure (task, shots, cache modes, passes) and *where*
(server profiles x variants). Everything downstream reads the resolved model;
nothing re-reads YAML. Loading (aliases, overrides, task checks) is `evalctl.config`.

This module is a leaf: it imports no registry and looks nothing up. A profile's engine settings are
typed by the open base `EngineSettings`; a mapping is validated by the union of the registered
engines' models, which `evalctl.config` passes in (the registry imports every engine, and every
engine reads this schema).
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from evalctl import venvs
from evalctl.cell import CacheMode  # defined with the cell key, which records imports without the config
from evalctl.errors import ConfigError
from evalctl.tasks.conversation import ConversationConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GenerationConfig(_Strict):
    max_tokens: int = Field(256, gt=0, description="Completion budget per question.")
    temperature: float = Field(0.0, ge=0.0)
    seed: int = 1234
    stop: list[str] | None = Field(None, description="Stop strings; default: the task's own.")
    stream: bool = Field(True, description="Stream completions, so each record carries TTFT and inter-token latency.")


def expand_text(text: str, what: str) -> str:
    """`text` with `$VAR` and `~` resolved; ConfigError (a ValueError) naming `what` if a variable is unset."""
    value = os.path.expanduser(os.path.expandvars(text))
    unset = re.findall(r"\$\{?(\w+)", value)
    if unset:
        raise ConfigError(f"{what} {text!r} uses unset environment variable {unset[0]}")
    return value


# The engine a profile names no engine for (and has no `url`): the CPU engine, what a laptop runs.
DEFAULT_ENGINE = "llamacpp"
# The validation context key of the union of the engines' settings that `evalctl.config` passes.
ENGINES = "engines"


class EngineSettings(_Strict):
    """An engine's own settings: the mapping under a profile's `engine:` (`engine: {name: sglang, tp: 4}`).

    Each engine's adapter names its subclass (`EngineAdapter.Settings`), whose `name` is the literal
    engine name: the discriminator of the union the engine registry builds over every engine it loads.
    """

    name: str = Field(description="The engine: llamacpp, sglang, vllm, or a plug-in's (docs/guide-add-engine.md).")

    def gpus_needed(self) -> int:
        """GPUs a server of this profile takes (0: a CPU engine, never given CUDA_VISIBLE_DEVICES)."""
        return 0

    def pinned_devices(self) -> list[str] | None:
        """GPU ids the profile pins; None lets the sweep pick."""
        return None

    def unpinned(self) -> EngineSettings:
        """These settings without pinned GPU ids (a Slurm job's GPUs are the ones Slurm gives it)."""
        return self

    def seed_default(self, seed: int) -> None:
        """Fill an engine-side sampling seed left unset with the sweep's generation seed (engines without one ignore it)."""


class ServerProfile(_Strict):
    """One way of serving the model: the fields every engine shares, and the engine's own settings under `engine`."""

    name: str
    model_path: str = Field(..., description="Weights path or hub id; `bundled:smollm2-135m` for the CPU model.")
    url: str | None = Field(None, description="Base URL of a running server: evalctl does not launch one.")
    engine: SerializeAsAny[EngineSettings] | None = Field(
        None,
        validate_default=True,
        description="The engine and its own settings: `engine: vllm`, or `engine: {name: vllm, tp: 2, ...}`; default llamacpp. "
        "With `url`: the engine serving it (its cache switches apply); left out, it is detected.",
    )
    port: int | None = Field(None, ge=1, le=65535, description="Fixed port; default: a free one.")
    host: str = "127.0.0.1"
    gpu: str | None = Field(None, description="GPU label, for the record (e.g. H100, B200).")
    startup_timeout_s: float = Field(300.0, gt=0, description="Big models load for 10+ minutes: raise this for them.")
    deterministic: bool = Field(
        False,
        description="Deterministic inference: SGLang --enable-deterministic-inference, vLLM VLLM_BATCH_INVARIANT=1 "
        "(llama.cpp on CPU already is).",
    )
    python: str | None = Field(
        None,
        description="Interpreter of this profile's engine (e.g. the vLLM CPU venv's, $VAR expanded), so profiles of one sweep "
        "can run different engines; a variant's `python` overrides it.",
    )
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_model(cls, engine: Any, info: ValidationInfo) -> Any:
        # A name or mapping is validated by its engine's model, picked by `name` in the union the caller passes.
        if engine is None and not info.data.get("url"):
            engine = DEFAULT_ENGINE  # a server to launch needs an engine; one at a URL is asked which it is
        if engine is None or isinstance(engine, EngineSettings):
            return engine
        union = (info.context or {}).get(ENGINES)
        if union is None:
            raise ValueError("an engine given by name is validated through evalctl.config (config_from_dict); else pass its Settings")
        return union.validate_python({"name": engine} if isinstance(engine, str) else engine)

    def gpus_needed(self) -> int:
        """GPUs a server of this profile takes: none for a server at `url`, which evalctl does not launch."""
        return 0 if self.url or self.engine is None else self.engine.gpus_needed()

    def interpreter(self, variant: Variant) -> str | None:
        """The Python the engine runs under: the variant's build (its venv, or the venv made for its `pip`), else this profile's;
        None: evalctl's own."""
        if variant.pip:
            return str(venvs.python_of(variant.pip))
        if variant.python:
            return variant.python
        return expand_text(self.python, f"server profile {self.name!r}: python") if self.python else None


class Variant(_Strict):
    """An engine build to A/B (baseline vs patched). The default variant is the installed one."""

    name: str = "default"
    python: str | None = Field(
        None, description="Interpreter of the build's venv ($VAR expanded); default: evalctl's own, or `python3` behind a command_prefix."
    )
    command_prefix: list[str] = Field(
        default_factory=list, description="Runner before the command: srun --container-image=..., docker run ..."
    )
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    git_revision: str | None = Field(None, description="The build's source revision, for the record.")
    pip: list[str] | None = Field(
        None,
        description="A build named by version: pip requirements (e.g. xllamacpp==2026.5.9294) of a venv evalctl makes, caches "
        "and serves from (evalctl.venvs), instead of `python`.",
    )

    @field_validator("pip", mode="before")
    @classmethod
    def _one_requirement(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("pip")
    @classmethod
    def _requirements(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("pip must name at least one requirement, e.g. xllamacpp==2026.5.9294")
            venvs.parse_requirements(value)
        return value

    @model_validator(mode="after")
    def _one_interpreter(self) -> Variant:
        if self.pip and (self.python or self.command_prefix):
            raise ValueError(f"variant {self.name!r}: `pip` makes the build's venv here; it goes without `python` and `command_prefix`")
        return self

    def expanded(self) -> Variant:
        """`$VAR` and `~` resolved in python and command_prefix; an unset variable is an error."""
        python = expand_text(self.python, f"variant {self.name!r}: python") if self.python else None
        prefix = [expand_text(part, f"variant {self.name!r}: command_prefix") for part in self.command_prefix]
        return self.model_copy(update={"python": python, "command_prefix": prefix})


def slurm_minutes(text: str) -> int:
    """A Slurm time limit (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in whole minutes, rounded up."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not match:
        raise ValueError(f"not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS): {text!r}")
    days, *rest = match.groups()
    parts = [int(p) for p in rest if p is not None]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        seconds = int(days) * 86400 + sum(v * m for v, m in zip(parts, (3600, 60, 1)))
    else:  # M, M:S, H:M:S
        seconds = sum(v * m for v, m in zip(parts, {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(parts)]))
    return max(1, -(-seconds // 60))


class SlurmConfig(_Strict):
    """How `--executor slurm` submits; --partition, --account, --qos and --time override it."""

    partition: str | None = Field(None, description="Slurm partition.")
    account: str | None = Field(None, description="Slurm account.")
    qos: str | None = Field(None, description="Slurm QoS.")
    time: str = Field("04:00:00", description="Time limit of each profile x variant job: minutes, HH:MM:SS or D-HH:MM:SS.")
    cpus_per_task: int | None = Field(
        None, ge=1, description="CPUs per profile x variant job (server and client); default: 8, or a node's CPUs if nodes have fewer."
    )
    mem_gb: float | None = Field(None, gt=0, description="Memory per job; default: the cluster's (DefMemPerCPU).")
    aggregate_time: str = Field("00:30:00", description="Time limit of the aggregation job (analysis, gate, report).")
    additional: dict[str, str | int | bool] = Field(
        default_factory=dict, description="More sbatch options for every job, e.g. {constraint: h100, reservation: nightly}."
    )

    @field_validator("time", "aggregate_time")
    @classmethod
    def _time_format(cls, value: str) -> str:
        slurm_minutes(value)
        return value


class StoppingMode(str, Enum):
    fixed = "fixed"
    sequential = "sequential"


class StoppingConfig(_Strict):
    """When a cell may stop before its last question (`analysis.sequential` holds the rule)."""

    mode: StoppingMode = Field(
        StoppingMode.fixed,
        description="fixed: every question; sequential: a cell stops once its comparison with the baseline is decided, at the gate "
        "policy's tolerance, alpha, metric and min_n unless stopping: sets them.",
    )
    baseline: Path | None = Field(None, description="An earlier complete run folder each cell is compared with.")
    # The decision settings default to the run's gate policy (`execution.stopping.with_policy_settings`),
    # so the rule that stops a cell and the gate that reads its decision hold one value each.
    tolerance: float | None = Field(
        None, ge=0, lt=1, description="Largest tolerated accuracy drop; default: the gate policy's max_accuracy_drop."
    )
    alpha: float | None = Field(
        None, gt=0, lt=0.5, description="Family-wise chance of a false regression, and of a false pass per cell; default: the policy's."
    )
    metric: str | None = Field(None, description="The task's metric scored; default: the gate policy's metric (else the task's first).")
    min_n: int | None = Field(None, ge=1, description="Paired questions at the first look; default: the gate policy's min_n.")
    growth: float = Field(1.15, gt=1, description="Each look has this many times the questions of the one before.")
    e_share: float = Field(0.1, ge=0, lt=1, description="Share of the regression level given to the betting e-process.")
    regression_share: float = Field(
        1.0, gt=0, le=1, description="Share of alpha for this process's regressions; a Slurm part gets its cells' share of the run's."
    )

    @model_validator(mode="after")
    def _baseline_given(self) -> StoppingConfig:
        if self.mode is StoppingMode.sequential and self.baseline is None:
            raise ValueError("sequential stopping needs a baseline run (stopping.baseline, or --baseline RUN)")
        return self


class SweepConfig(_Strict):
    model: str = Field(..., description="Model label used in run ids and history.")
    task: str = Field(
        "gsm8k",
        description="An lm-eval generate_until task: gsm8k, prefix-recall (answers read back from records in the prefix; shots count "
        "the records), a task in include_path, a task YAML file, or a task lm-eval registers.",
    )
    include_path: Path | None = Field(
        None, description="A folder of lm-eval task YAML the task is looked up in (lm-eval's --include_path)."
    )
    shots: list[int] = Field(default_factory=lambda: list(range(8, 21, 2)), description="Few-shot counts, e.g. 8,12,16,20.")
    fewshot: Literal["shared", "sampled"] = Field(
        "shared",
        description="Few-shot mode: shared (the first k train examples, one shared prefix) or sampled (lm-eval's per-question sampling).",
    )
    cache: list[CacheMode] = Field(
        default_factory=lambda: [CacheMode.on, CacheMode.off], description="Prefix-cache modes to run: on, off, or both."
    )
    limit: int | None = Field(None, description="Questions per cell; default: the whole test split.")
    limit_order: Literal["shuffled", "head"] = Field(
        "shuffled", description="Which questions `limit` keeps: the first N of a seeded shuffle, or the first N (lm-eval's --limit)."
    )
    limit_seed: int = Field(1234, description="Seed of the shuffle `limit_order: shuffled` takes the first N from.")
    passes: int = Field(1, ge=1, le=10, description="Warm passes per cell without a flush between.")
    concurrency: int = Field(4, ge=1, le=1024, description="Requests in flight per server (conversations with a conversation workload).")
    request_timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(3, ge=0, description="Retries of a request after a timeout, connection error or 5xx.")
    max_restarts: int = Field(2, ge=0, description="Restarts of a server that dies mid-launch; 0: fail its cells instead.")
    data_dir: Path | None = Field(
        None,
        description="Dataset folder with train.jsonl and test.jsonl, or `hub` for the Hugging Face hub; default: $EVALCTL_DATA_DIR, "
        "else the pinned copy inside evalctl.",
    )
    output_dir: Path = Field(Path("results"), description="Results root; each run's folder is created inside it.")
    gate_policy: str | None = Field(
        None, description="Policy of the verdict a sweep prints: a policy name (cpu-smoke; evalctl models list) or a YAML path."
    )
    probe: bool = Field(False, description="Run the cache-consistency probe on each cache-on server before its cells (probe.json).")
    noise: bool = Field(
        False,
        description="A/A arm: run each server's reference cells (every variant and shot count) a second time, cold, on the same "
        "server (noise-<profile>-<variant>.jsonl), to measure each build's own flips.",
    )
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    servers: list[ServerProfile]
    variants: list[Variant] = Field(default_factory=lambda: [Variant()])
    run_variants: list[str] | None = Field(None, description="Names of the variants to run; default: all of them.")
    gpus: list[str] | None = Field(
        None, description="GPU ids the sweep may use, or a count N for 0..N-1; default: CUDA_VISIBLE_DEVICES, else nvidia-smi."
    )
    slurm: SlurmConfig = Field(default_factory=SlurmConfig, description="Job settings for `--executor slurm`.")
    stopping: StoppingConfig = Field(default_factory=StoppingConfig, description="Fixed-n (default) or sequential stopping of cells.")
    conversation: ConversationConfig | None = Field(
        None,
        description="Send the task's questions as conversations that grow, rewind and branch (docs/conversations.md); "
        "concurrency is then conversations in flight.",
    )
    canary: str | None = Field(
        None,
        description="Put evalctl's fault proxy (evalctl canary) with this fault in front of every cache-on server: "
        "a demonstration that the gate catches the fault; such a run is marked as a canary run.",
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_pool(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return [str(i) for i in range(value)]
        return [str(v) for v in value] if isinstance(value, list) else value

    @field_validator("canary")
    @classmethod
    def _known_fault(cls, fault: str | None) -> str | None:
        from evalctl.canary.faults import FAULTS

        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        return fault

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
        known = [v.name for v in self.variants]
        unknown = [n for n in self.run_variants or [] if n not in known]
        if unknown:
            raise ValueError(f"run_variants: unknown variant(s) {unknown}; known: {', '.join(known)}")
        if self.conversation is not None and self.stopping.mode is StoppingMode.sequential:
            raise ValueError("a conversation workload runs whole conversations: sequential stopping cannot stop one mid-way")
        if self.run_variants is not None and not self.run_variants:
            raise ValueError("run_variants must name at least one variant")
        # Variants that will run get their paths resolved now, so a missing $VAR stops the sweep before any launch.
        self.variants = [v.expanded() if v.name in self.active_variant_names() else v for v in self.variants]
        for server in self.servers:
            if server.engine is not None:
                server.engine.seed_default(self.generation.seed)
        return self

    def active_variant_names(self) -> list[str]:
        return list(self.run_variants) if self.run_variants else [v.name for v in self.variants]

    def active_variants(self) -> list[Variant]:
        """The variants this sweep runs, in config order."""
        names = set(self.active_variant_names())
        return [v for v in self.variants if v.name in names]
