"""The sweep config's schema: pydantic models that look nothing up (loading is `evalctl.config`).

A leaf: of evalctl it imports only the errors. A profile's `engine:` is validated by the union of the registered
engines' settings, which the engine registry hands over (`EngineSettings.union`): every engine imports this schema.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from evalctl.errors import ConfigError


class CacheMode(str, Enum):
    on = "on"
    off = "off"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Cli:
    """Marks a config field (`Annotated[T, Cli()]`) as an option of `evalctl sweep`, which `evalctl.cli.options`
    builds from the field (name, type, description, default); the rest says what the field cannot."""

    flags: tuple[str, ...] = ()  # default: --<field name>
    metavar: str | None = None
    panel: str | None = None  # on a section (`slurm`): the --help panel of its options
    selects: str | None = None  # an Enum field: the value a bare flag picks (--sequential)
    count: bool = False  # a list a bare integer also gives, as a count (--gpus 8)
    absolute: bool = False  # a path recorded absolute, so a resume from another folder finds it


CLI = Cli()


def _listed(value: Any) -> Any:
    """One value given where a list goes (`pip: x==1`, `concurrency: 4`): a list of it."""
    return [value] if isinstance(value, (str, int)) and not isinstance(value, bool) else value


class GenerationConfig(_Strict):
    max_tokens: Annotated[int, CLI] = Field(256, gt=0, description="Completion budget per question.")
    temperature: float = Field(0.0, ge=0.0)
    seed: int = 1234
    stop: list[str] | None = Field(None, description="Stop strings; default: the task's own.")
    stream: bool = Field(True, description="Stream completions, so each record carries TTFT and inter-token latency.")
    top_logprobs: int | None = Field(
        None,
        ge=0,
        le=20,
        description="Alternatives per generated token asked for and kept in the records, for the exact and divergence rungs"
        " (analysis.divergence); 0: none; default: 5 with a workload, else 0.",
    )


def expand_text(text: str, what: str) -> str:
    """`text` with `$VAR` and `~` resolved; ConfigError (a ValueError) naming `what` if a variable is unset."""
    value = os.path.expanduser(os.path.expandvars(text))
    unset = re.findall(r"\$\{?(\w+)", value)
    if unset:
        raise ConfigError(f"{what} {text!r} uses unset environment variable {unset[0]}")
    return value


# The engine a profile names no engine for (and has no `url`): the CPU engine, what a laptop runs.
DEFAULT_ENGINE = "llamacpp"


class EngineSettings(_Strict):
    """An engine's own settings: the mapping under a profile's `engine:` (`engine: {name: sglang, tp: 4}`). Each
    adapter's subclass (`EngineAdapter.Settings`) has the literal engine name as `name`, the union's discriminator."""

    name: str = Field(description="The engine: llamacpp, sglang, vllm, or a plug-in's (docs/guide-add-engine.md).")
    # Set by the engine registry (`evalctl.servers.registry`) when imported.
    union: ClassVar[Callable[[], TypeAdapter[EngineSettings]] | None] = None

    def gpus_needed(self) -> int:
        """GPUs a server of this profile takes (0: a CPU engine, never given CUDA_VISIBLE_DEVICES)."""
        return 0

    def pinned_devices(self) -> list[str] | None:
        """GPU ids the profile pins; None lets the sweep pick."""
        return None

    def unpinned(self) -> EngineSettings:
        """These settings without pinned GPU ids (a Slurm job's GPUs are the ones Slurm gives it)."""
        return self

    def seeded(self, seed: int) -> EngineSettings:
        """These settings, an engine-side sampling seed left unset set to the sweep's generation seed (no such seed: as they are)."""
        return self

    def with_slots(self, requests: int) -> EngineSettings:
        """These settings with room for `requests` in flight where the engine's slot count was left unset (a concurrency
        sweep's highest level, so the server batches that many; no such setting: as they are)."""
        return self


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
        if engine is None and not info.data.get("url"):
            engine = DEFAULT_ENGINE  # a server to launch needs an engine; one at a URL is asked which it is
        if engine is None or isinstance(engine, EngineSettings):
            return engine
        if EngineSettings.union is None:
            raise ValueError("an engine given by name needs the engine registry: import evalctl.servers.registry, or pass its Settings")
        return EngineSettings.union().validate_python({"name": engine} if isinstance(engine, str) else engine)

    def gpus_needed(self) -> int:
        """GPUs a server of this profile takes: none for a server at `url`, which evalctl does not launch."""
        return 0 if self.url or self.engine is None else self.engine.gpus_needed()


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
    pip: Annotated[list[str] | None, BeforeValidator(_listed)] = Field(
        None,
        description="A build named by version: pip requirements (e.g. xllamacpp==2026.5.9294) of a venv evalctl makes, caches "
        "and serves from (evalctl.venvs), instead of `python`.",
    )

    @field_validator("pip")
    @classmethod
    def _requirements(cls, value: list[str] | None) -> list[str] | None:
        if value == []:
            raise ValueError("pip must name at least one requirement, e.g. xllamacpp==2026.5.9294")
        for text in value or []:
            try:
                Requirement(text)
            except InvalidRequirement as exc:
                raise ValueError(f"not a pip requirement: {text!r} ({exc})") from None
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


# A Slurm time limit: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (`cluster.slurm.slurm_minutes` reads it).
SLURM_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def _slurm_time(text: str) -> str:
    if not SLURM_TIME.fullmatch(text.strip()):
        raise ValueError(f"not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS): {text!r}")
    return text


SlurmTime = Annotated[str, AfterValidator(_slurm_time)]


class SlurmConfig(_Strict):
    """How `--executor slurm` submits; --partition, --account, --qos and --time override it."""

    partition: Annotated[str | None, CLI] = Field(None, description="Slurm partition.")
    account: Annotated[str | None, CLI] = Field(None, description="Slurm account.")
    qos: Annotated[str | None, CLI] = Field(None, description="Slurm QoS.")
    time: Annotated[SlurmTime, CLI] = Field(
        "04:00:00", description="Time limit of each profile x variant job: minutes, HH:MM:SS or D-HH:MM:SS."
    )
    cpus_per_task: Annotated[int | None, CLI] = Field(
        None, ge=1, description="CPUs per profile x variant job (server and client); default: 8, or a node's CPUs if nodes have fewer."
    )
    mem_gb: float | None = Field(None, gt=0, description="Memory per job; default: the cluster's (DefMemPerCPU).")
    aggregate_time: SlurmTime = Field("00:30:00", description="Time limit of the aggregation job (analysis, gate, report).")
    additional: dict[str, str | int | bool] = Field(
        default_factory=dict, description="More sbatch options for every job, e.g. {constraint: h100, reservation: nightly}."
    )


EventKind = Literal["rewind", "branch"]


class ConversationConfig(_Strict):
    """The shape of a conversation workload (a sweep's `conversation:`)."""

    conversations: int = Field(4, ge=1, description="Conversations per cell.")
    boundaries: list[int] = Field(
        default_factory=lambda: [512],
        description="Token counts growth must cross: the engine's SWA window, Mamba block, prefill chunk, KV page.",
    )
    grow_past: float = Field(2.0, ge=1.0, description="A conversation first grows to this many times the largest boundary.")
    events: int = Field(3, ge=0, description="Rewinds or branches per conversation, each followed by growth past a boundary.")
    kinds: list[EventKind] = Field(default_factory=lambda: ["rewind", "branch"], description="Which events to draw.")
    first_event: EventKind | None = Field(
        None,
        description="The first event's kind (default: drawn from kinds like the others). `branch` with kinds [rewind] and"
        " revisit 1: one turn edited, then regenerated at every later event.",
    )
    revisit: float = Field(
        0.5, ge=0.0, le=1.0, description="Chance an event goes back to the turn of the previous one (regenerating an edited turn)."
    )
    regrow: tuple[float, float] = Field(
        (1.0, 2.0), description="After an event, growth by this many times a boundary (lowest, highest; drawn uniformly)."
    )
    turn_questions: tuple[int, int] = Field(
        (1, 1), description="Questions per turn (lowest, highest): earlier ones answered in the turn, the last asked."
    )
    chars_per_token: float = Field(4.0, gt=0, description="For length estimates (the records keep the server's token counts).")
    judge: Literal["every", "returns"] = Field(
        "every",
        description="Which requests are scored and paired with a cold twin: every one, or the returns only (the requests"
        " before a return are its history: sent warm, unscored, never cold). With events 1: one independent pair per conversation.",
    )
    seed: int = 1234

    @model_validator(mode="after")
    def _valid(self) -> ConversationConfig:
        if not self.boundaries or min(self.boundaries) < 1:
            raise ValueError("conversation.boundaries must list token counts >= 1")
        if not self.kinds and self.events:
            raise ValueError("conversation.kinds must name rewind and/or branch when events > 0")
        low, high = self.turn_questions
        if not 1 <= low <= high:
            raise ValueError(f"conversation.turn_questions must be (low, high) with 1 <= low <= high, got {self.turn_questions}")
        if not 0 < self.regrow[0] <= self.regrow[1]:
            raise ValueError(f"conversation.regrow must be (low, high) with 0 < low <= high, got {self.regrow}")
        if self.judge == "returns" and not self.events:
            raise ValueError("conversation.judge: returns scores rewinds and branches only: it needs events >= 1")
        return self


class SloConfig(_Strict):
    """A latency objective; goodput is the rate of answered requests that met it (`analysis.throughput`)."""

    ttft_ms: float | None = Field(None, gt=0, description="Longest time to the first token a request may take, in ms.")
    itl_ms: float | None = Field(None, gt=0, description="Longest mean inter-token latency a request may have, in ms.")

    @model_validator(mode="after")
    def _some_objective(self) -> SloConfig:
        if self.ttft_ms is None and self.itl_ms is None:
            raise ValueError("slo needs ttft_ms, itl_ms or both")
        return self


class Lead(_Strict):
    """A return a hunt found beyond the healthy spread, to follow up: its conversation's shape sent again with other
    questions (`analysis.leads` finds them; `evalctl sweep --follow RUN` sends them)."""

    conversation: int = Field(ge=0, description="The conversation, numbered as the hunt that found it generated them.")
    ret: int = Field(ge=0, description="Which of its returns (0: the first).")


class HuntConfig(_Strict):
    """The `hunt` workload's settings (a sweep's `hunt:`); its shape is read from the model and server when the config
    is loaded and recorded here (`boundaries`, `slots`, `shape`), so a resumed run generates the same requests."""

    boundaries: dict[str, int] | None = Field(
        None,
        description="Token counts the histories grow past and return around, by what they are (swa_window, swa_cache, ubatch,"
        " kv_block, chunked_prefill); default: read from the model file and the server's settings at load.",
    )
    slots: int | None = Field(None, ge=1, description="The server's request slots; default: read from its settings.")
    shape: dict[str, str] = Field(default_factory=dict, description="Where each figure came from: read (and from what) or assumed.")
    conversations: int | None = Field(
        None, ge=1, description="Conversations a cell; default: slots + 1 (the last evicts a slot), more until 30 requests are judged."
    )
    max_context: int = Field(1600, ge=64, description="Boundaries above this many tokens are left out: the cost bound.")
    references: int = Field(
        2, ge=1, description="Extensions judged per return, those nearest it in length: the healthy warm-vs-cold reference the"
        " logprob rungs judge returns against; the other extensions are sent warm only, as history."
    )  # fmt: skip
    turn_questions: tuple[int, int] = Field((1, 3), description="Questions per turn (lowest, highest).")
    chars_per_token: float = Field(
        2.0,
        gt=0,
        description="For length estimates (the records keep the server's token counts); default: read at load from the model's"
        " GGUF vocabulary over the task's prompts, else 2.0.",
    )
    seed: int = 1234
    follow: list[Lead] = Field(
        default_factory=list,
        description="Returns an earlier hunt (the same seed and shape) found beyond the spread: instead of new conversations,"
        " `copies` of each one's conversation, the same shape with other questions, up to that return, which alone is judged.",
    )
    follow_up: bool = Field(
        True,
        description="When the hunt ends, follow up its leads (returns beyond the healthy spread on a build it could not call):"
        " a run of copies of their conversations, written into the hunt's folder (follow-up/) and judged with it by"
        " `evalctl gate`; local sweeps (on Slurm: `evalctl sweep --follow RUN`).",
    )
    copies: int | None = Field(
        None,
        ge=1,
        description="Copies of each followed conversation (`follow`); default: enough for 30 judged requests in all and 10"
        " healthy pairs a lead.",
    )


class StoppingMode(str, Enum):
    fixed = "fixed"
    sequential = "sequential"


class StoppingConfig(_Strict):
    """When a cell may stop before its last question (`analysis.sequential` holds the rule)."""

    mode: Annotated[StoppingMode, Cli(flags=("--sequential",), selects=StoppingMode.sequential.value)] = Field(
        StoppingMode.fixed,
        description="fixed: every question; sequential: a cell stops once its comparison with the baseline is decided, at the gate "
        "policy's tolerance, alpha, metric and min_n unless stopping: sets them.",
    )
    baseline: Annotated[Path | None, Cli(absolute=True)] = Field(
        None, description="An earlier complete run folder each cell is compared with."
    )
    # Unset: the run's gate policy's (`execution.stopping.with_policy_settings`), so the stop and the gate agree.
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
    task: Annotated[str, Cli(absolute=True)] = Field(
        "gsm8k",
        description="An lm-eval generate_until task: gsm8k, prefix-recall (answers read back from records in the prefix; shots count "
        "the records), a task in include_path, a task YAML file, or a task lm-eval registers.",
    )
    include_path: Annotated[Path | None, Cli(absolute=True)] = Field(
        None, description="A folder of lm-eval task YAML the task is looked up in (lm-eval's --include_path)."
    )
    shots: Annotated[list[int], CLI] = Field(default_factory=lambda: list(range(8, 21, 2)), description="Few-shot counts, e.g. 8,12,16,20.")
    fewshot: Annotated[Literal["shared", "sampled"], CLI] = Field(
        "shared",
        description="Few-shot mode: shared (the first k train examples, one shared prefix) or sampled (lm-eval's per-question sampling; "
        "always, in a sweep of several concurrency levels).",
    )
    cache: Annotated[list[CacheMode], CLI] = Field(
        default_factory=lambda: [CacheMode.on, CacheMode.off], description="Prefix-cache modes to run: on, off, or both."
    )
    limit: Annotated[int | None, CLI] = Field(
        None, description="Questions per cell; default: the whole test split (prefix-recall: one per record, more lists for more)."
    )
    limit_order: Annotated[Literal["shuffled", "head"], CLI] = Field(
        "shuffled", description="Which questions `limit` keeps: the first N of a seeded shuffle, or the first N (lm-eval's --limit)."
    )
    limit_seed: int = Field(1234, description="Seed of the shuffle `limit_order: shuffled` takes the first N from.")
    passes: Annotated[int, CLI] = Field(1, ge=1, le=10, description="Warm passes per cell without a flush between.")
    concurrency: Annotated[list[int], CLI, BeforeValidator(_listed)] = Field(
        default_factory=lambda: [4],
        description="Requests in flight per server (conversations with a conversation workload); a list, e.g. 1,8,32, sweeps "
        "it as an axis: the same prompts at each level, every level judged against the lowest.",
    )
    slo: SloConfig | None = Field(
        None, description="A latency objective, {ttft_ms, itl_ms}: the report's goodput counts the requests that met it (streamed only)."
    )
    request_timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(3, ge=0, description="Retries of a request after a timeout, connection error or 5xx.")
    max_restarts: Annotated[int, CLI] = Field(2, ge=0, description="Restarts of a server that dies mid-launch; 0: fail its cells instead.")
    side_by_side: Annotated[int, CLI] = Field(
        1,
        ge=0,
        description="Servers run at once, each launch (profile x variant x cache mode) its own; 0: as many as this machine's"
        " cores hold where every launch is a CPU server that names its threads (cores // threads; the hunt's default), else 1."
        " Always 1 with GPUs or a server at a URL.",
    )
    data_dir: Annotated[Path | None, CLI] = Field(
        None,
        description="Dataset folder with train.jsonl and test.jsonl, or `hub` for the Hugging Face hub; default: $EVALCTL_DATA_DIR, "
        "else the pinned copy inside evalctl.",
    )
    output_dir: Annotated[Path, Cli(flags=("--output", "-o"))] = Field(
        Path("results"), description="Results root; each run's folder is created inside it."
    )
    gate_policy: str | None = Field(
        None, description="Policy of the verdict a sweep prints: a policy name (cpu-smoke; evalctl models list) or a YAML path."
    )
    probe: bool = Field(False, description="Run the cache-consistency probe on each cache-on server before its cells (probe.json).")
    noise: Annotated[bool, CLI] = Field(
        False,
        description="A/A arm: run each server's reference cells (every variant and shot count) a second time, cold, on the same "
        "server (noise-<profile>-<variant>.jsonl), to measure each build's own flips.",
    )
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    servers: list[ServerProfile]
    variants: list[Variant] = Field(default_factory=lambda: [Variant()])
    run_variants: Annotated[list[str] | None, Cli(flags=("--variants",))] = Field(
        None, description="Names of the variants to run; default: all of them."
    )
    gpus: Annotated[list[str] | None, Cli(metavar="<ids|count>", count=True)] = Field(
        None, description="GPU ids the sweep may use, or a count N for 0..N-1; default: CUDA_VISIBLE_DEVICES, else nvidia-smi."
    )
    slurm: Annotated[SlurmConfig, Cli(panel="Slurm")] = Field(
        default_factory=SlurmConfig, description="Job settings for `--executor slurm`."
    )
    stopping: StoppingConfig = Field(default_factory=StoppingConfig, description="Fixed-n (default) or sequential stopping of cells.")
    workload: Annotated[str | None, Cli(metavar="NAME")] = Field(
        None,
        description="How the task's questions are sent: conversation (as the `conversation:` block says) or hunt (histories"
        " generated from the server's and model's shape), docs/conversations.md; concurrency is then conversations in flight;"
        " default: each question alone (conversation when the config has a `conversation:` block). --workload hunt on a file"
        " not written for it (an alias) replaces the file's task, shots, limit, noise, policy and answer length by the hunt's.",
    )
    conversation: ConversationConfig | None = Field(
        None,
        description="Send the task's questions as conversations that grow, rewind and branch (docs/conversations.md); "
        "concurrency is then conversations in flight.",
    )
    hunt: HuntConfig = Field(default_factory=HuntConfig, description="The hunt workload's settings (workload: hunt).")
    canary: Annotated[str | None, Cli(metavar="FAULT")] = Field(
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

    @field_validator("shots")
    @classmethod
    def _shots_valid(cls, shots: list[int]) -> list[int]:
        if not shots:
            raise ValueError("shots must list at least one count")
        bad = [s for s in shots if s < 0]
        if bad:
            raise ValueError(f"shot counts must be >= 0, got {bad}")
        return sorted(dict.fromkeys(shots))

    @field_validator("concurrency")
    @classmethod
    def _levels_valid(cls, levels: list[int]) -> list[int]:
        bad = [c for c in levels if not 1 <= c <= 1024]
        if not levels or bad:
            raise ValueError(f"concurrency must list levels from 1 to 1024, got {levels}")
        return sorted(dict.fromkeys(levels))

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
        if (self.workload or self.conversation) is not None and self.stopping.mode is StoppingMode.sequential:
            raise ValueError("a workload runs whole conversations: sequential stopping cannot stop one mid-way")
        if self.run_variants is not None and not self.run_variants:
            raise ValueError("run_variants must name at least one variant")
        return self

    def active_variants(self) -> list[Variant]:
        """The variants this sweep runs, in config order."""
        return [v for v in self.variants if not self.run_variants or v.name in self.run_variants]
