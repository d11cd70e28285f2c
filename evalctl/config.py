"""Loading the sweep config (the models are `evalctl.schema`'s): model aliases (found by `config_files`), CLI
overrides, the checks that look something up (a task's shot counts, the workload, the canary's fault) and the values
resolved once (variants' paths, the engines' sampling seed).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalctl import config_files
from evalctl.canary.faults import FAULTS
from evalctl.errors import ConfigError
from evalctl.plan import prompts_at
from evalctl.schema import DEFAULT_ENGINE, ServerProfile, SweepConfig, Variant
from evalctl.servers.registry import ENGINES, engines
from evalctl.servers.shape import read_shape
from evalctl.servers.vocabulary import chars_per_token
from evalctl.tasks.lmeval import task_of
from evalctl.tasks.registry import WORKLOADS, registered_task


def _resolved(config: SweepConfig, source: str) -> SweepConfig:
    """`config` checked against what the schema cannot know, with its variants' paths, its engines' seed and slots resolved."""
    problems = []
    spec = registered_task(config.task)
    if spec is not None and min(config.shots) < spec.min_shots:
        problems.append(f"shots: task {config.task} counts records as shots: every shot count must be >= {spec.min_shots}")
    if config.workload is not None and WORKLOADS.find(config.workload) is None:
        problems.append(f"workload: unknown workload {config.workload!r}; known: {', '.join(WORKLOADS.names())}")
    if config.canary is not None and config.canary not in FAULTS:
        problems.append(f"canary: unknown fault {config.canary!r}; known: {', '.join(FAULTS)}")
    # Variants that will run get their paths resolved now, so a missing $VAR stops the sweep before any launch.
    active = {v.name for v in config.active_variants()}
    try:
        variants = [v.expanded() if v.name in active else v for v in config.variants]
    except ConfigError as exc:
        problems.append(f"variants: {exc}")
    if problems:
        raise ConfigError("\n  ".join([f"invalid config {source}:", *problems]))
    seed, levels = config.generation.seed, config.concurrency
    # A concurrency sweep's servers get slots for its highest level (one level leaves the engine's own default).
    slotted = (lambda e: e.with_slots(levels[-1])) if len(levels) > 1 else (lambda e: e)
    servers = [s.model_copy(update={"engine": slotted(s.engine.seeded(seed))}) if s.engine else s for s in config.servers]
    return resolve_hunt(implied(config.model_copy(update={"variants": variants, "servers": servers})))


def implied(config: SweepConfig) -> SweepConfig:
    """The settings others imply, where the config left them unset; set at load, so the manifest records them."""
    workload = config.workload or ("conversation" if config.conversation is not None else None)
    update: dict[str, Any] = {"workload": workload} if workload != config.workload else {}
    if config.generation.top_logprobs is None:
        update["generation"] = config.generation.model_copy(update={"top_logprobs": 5 if workload else 0})
    if len(config.concurrency) > 1 and workload is None and config.fewshot != "sampled":
        # One prefix shared by every request in flight: a slot leaking into another would not change an answer (docs/configs.md).
        update["fewshot"] = "sampled"
    return config.model_copy(update=update) if update else config


# What `workload: hunt` sets when the config does not: one short cell of prefix-recall questions (4 records each),
# short answers judged warm vs cold by their logprobs (the `hunt` policy: the answer rung, no speed check). No A/A
# arm: a cold-vs-cold pair is no reference for a warm one (`analysis.divergence`), and it costs a second cold pass.
HUNT_DEFAULTS: dict[str, Any] = {
    "task": "prefix-recall", "fewshot": "sampled", "shots": [4], "limit": 40, "noise": False, "gate_policy": "hunt",
}  # fmt: skip
HUNT_MAX_TOKENS = 16
RATIO_SAMPLE = 20  # the task's prompts the characters per token are estimated over


def resolve_hunt(config: SweepConfig) -> SweepConfig:
    """A hunt's config complete: its defaults where unset, the first server's shape read (`servers.shape`) and recorded
    in `hunt`, as many conversations in flight as it has slots, llama.cpp's host-RAM prompt cache left on for the warm arm,
    servers side by side where the cores hold them.
    Idempotent: a recorded config (a resume) is resolved to itself."""
    if config.workload != "hunt":
        return config
    update = {k: v for k, v in HUNT_DEFAULTS.items() if k not in config.model_fields_set}
    if "max_tokens" not in config.generation.model_fields_set:
        update["generation"] = config.generation.model_copy(update={"max_tokens": HUNT_MAX_TOKENS})
    hunt = config.hunt
    ratio_given = "chars_per_token" in hunt.model_fields_set
    shape = read_shape(config.servers[0]) if hunt.boundaries is None or hunt.slots is None or not ratio_given else None
    if shape is not None:
        hunt = hunt.model_copy(
            update={"boundaries": hunt.boundaries or shape.boundaries, "slots": hunt.slots or shape.slots, "shape": shape.sources}
        )
    update["hunt"] = hunt
    if "side_by_side" not in config.model_fields_set:
        update["side_by_side"] = 0  # the warm and cold arms side by side where the cores hold both: the hunt's cost bound
    if "concurrency" not in config.model_fields_set:
        # One conversation a slot: interleaved on one slot, llama.cpp's RAM cache hands each return the exact state it
        # saved, and no return meets the slot's checkpoints (b9538 hunted so: no return moved more than 0.093 nats).
        update["concurrency"] = [hunt.slots or 1]
    update["servers"] = [_ram_cache_on(s) for s in config.servers]
    resolved = config.model_copy(update=update)
    if shape is not None and not ratio_given:
        resolved = resolved.model_copy(update={"hunt": _with_ratio(resolved, shape.model_file)})
    resolved.model_fields_set.update(update)  # recorded as given: a resume keeps them
    return resolved


def _with_ratio(config: SweepConfig, model_file: str | None):
    """The hunt's characters per token read from the model's vocabulary over the task's prompts, else the default kept."""
    hunt = config.hunt
    texts = [p.text for p in prompts_at(task_of(config), config.shots[0], RATIO_SAMPLE)]
    ratio, source = chars_per_token(model_file, texts)
    if ratio is None:
        source = f"assumed: {hunt.chars_per_token} ({source})"
    ratio = round(ratio, 3) if ratio else hunt.chars_per_token
    return hunt.model_copy(update={"chars_per_token": ratio, "shape": {**hunt.shape, "chars_per_token": source}})


def _ram_cache_on(profile: ServerProfile) -> ServerProfile:
    engine = profile.engine
    if engine is None or "cache_ram_mib" not in type(engine).model_fields or "cache_ram_mib" in engine.model_fields_set:
        return profile
    return profile.model_copy(update={"engine": engine.model_copy(update={"cache_ram_mib": None})})


def alias_path(name: str) -> Path:
    found = config_files.find(name)
    if found is None:
        raise ConfigError(f"unknown model alias {name!r}; known: {', '.join(config_files.known()) or '(none)'}")
    return found.path


def _format_validation(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        loc, msg = list(err["loc"]), "unknown field" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        if loc[:1] == ["servers"] and loc[2:3] == ["engine"]:
            if len(loc) > 4:
                engine = str(loc.pop(3))  # the union's tag: the engine's name
                if err["type"] == "extra_forbidden":
                    takes = ", ".join(f for f in ENGINES.get(engine).Settings.model_fields if f != "name") or "none"
                    msg = f"not a setting of engine {engine!r} (its own settings: {takes})"
            elif err["type"] == "union_tag_invalid":
                msg = f"unknown engine {err['ctx']['tag']!r}; known: {', '.join(adapter.name for adapter in engines())}"
        lines.append(f"  {'.'.join(map(str, loc)) or '(top level)'}: {msg}")
    return "\n".join(lines)


def load_config(*, model: str | None = None, config_file: Path | None = None, overrides: dict[str, Any] | None = None) -> SweepConfig:
    """Resolve `--model` (alias) or `--config` (file), then apply CLI overrides."""
    if (model is None) == (config_file is None):
        raise ConfigError("give exactly one of --model NAME or --config FILE")
    path = alias_path(model) if model else Path(config_file)  # type: ignore[arg-type]
    return config_from_dict(config_files.read_yaml(path, "config", ConfigError), overrides, str(path))


def url_config(url: str, engine: str | None, served: str, overrides: dict[str, Any]) -> SweepConfig:
    """A config with no file: the one server at `url` (`served`: the model it serves), shots 1, 2, 4 and 8 unless overridden."""
    data = {"model": "external", "shots": [1, 2, 4, 8], "servers": [{"name": "external", "model_path": served}]}
    return with_external_url(config_from_dict(data, overrides, f"--url {url}"), url, engine)


def _given_as_options(message: str, overrides: dict[str, Any]) -> str:
    """The error's lines about a field an option set, or about the part of its key that is wrong, marked so: the fault
    is the option's, not the file's."""
    locations = []
    for key in overrides:  # `*` (EACH_ENGINE) stands for any profile
        parts = re.escape(key).replace(r"\*", r"\d+").split(r"\.")
        locations += [r"\.".join(parts[:n]) + ":" for n in range(1, len(parts) + 1)] + [r"\.".join(parts) + r"\."]
    given = re.compile("  (" + "|".join(locations) + ")")
    return "\n".join(f"{line} (given as an option)" if overrides and given.match(line) else line for line in message.splitlines())


def config_from_dict(data: dict[str, Any], overrides: dict[str, Any] | None, source: str) -> SweepConfig:
    """Validate a config mapping after applying CLI overrides; `source` names it in errors."""
    data = copy.deepcopy(data)
    # `task_settings: {task: {field: value}}` in a config file: that task's own fields (shots, limit,
    # generation), applied when it runs (`--task gsm8k` on the recall default), under the CLI's. Resolved
    # here, so a recorded config (manifest) holds the result and resuming it applies nothing again.
    task = (overrides or {}).get("task") or data.get("task", "gsm8k")
    data.update((data.pop("task_settings", None) or {}).get(task, {}))
    if (overrides or {}).get("workload") == "hunt" and data.get("workload") != "hunt" and "hunt" not in data:
        # A file not written for the hunt (an alias) chose these for its own sweep; the hunt given as an option brings its
        # own, and the options still win.
        for key in (*HUNT_DEFAULTS, "concurrency", "conversation"):
            data.pop(key, None)
        (data.get("generation") or {}).pop("max_tokens", None)
    for key, value in (overrides or {}).items():
        _override(data, key, value)
    try:
        return _resolved(validated(data), source)
    except ValidationError as exc:
        message = _format_validation(exc, source)
    except ConfigError as exc:
        message = str(exc)
    raise ConfigError(_given_as_options(message, overrides or {}))


# The key of an engine setting's option: the setting, on every profile whose engine takes it.
EACH_ENGINE = "servers.*.engine."


def _override(data: dict[str, Any], key: str, value: Any) -> None:
    """Set the dotted `key` of a config mapping: "generation.max_tokens" reaches into a section, "servers.0.port" into a
    list's item, "servers.*.engine.threads" into every profile whose engine takes the setting."""
    parts = key.split(".")
    for profile in data.get("servers") or [] if parts[0] == "servers" and parts[2:3] == ["engine"] else []:
        if isinstance(profile, dict):  # its engine as a mapping, so the key can reach the engine's settings
            engine = profile.get("engine") or (None if profile.get("url") else DEFAULT_ENGINE)
            profile["engine"] = {"name": engine} if isinstance(engine, str) else engine
    if key.startswith(EACH_ENGINE):
        setting = key.removeprefix(EACH_ENGINE)
        takers = [p["engine"] for p in data["servers"] if p.get("engine") and _takes(p["engine"].get("name"), setting)]
        if not takers:
            raise ConfigError(f"no server profile's engine takes the setting {setting!r}")
        for engine in takers:
            engine[setting] = value
        return
    *parents, leaf = parts
    target: Any = data
    for part in parents:
        slot = _slot(target, part, key)
        if isinstance(target, dict) and target.get(slot) is None:
            target[slot] = {}
        target = target[slot]
    target[_slot(target, leaf, key)] = value


def _slot(target: Any, part: str, key: str) -> int | str:
    """Where `part` of `key` is in `target`: an index of a list, a key of a mapping."""
    if isinstance(target, dict):
        return part
    if isinstance(target, list) and part.isdigit() and int(part) < len(target):
        return int(part)
    where = f"an index of its list (0 to {len(target) - 1})" if isinstance(target, list) else "in a mapping"
    raise ConfigError(f"cannot set {key}: {part!r} is not {where}")


def _takes(engine: str | None, setting: str) -> bool:
    return any(adapter.name == engine and setting in adapter.Settings.model_fields for adapter in engines())


def validated(data: dict[str, Any]) -> SweepConfig:
    """A config mapping as a SweepConfig (nothing resolved); ValidationError if invalid. Importing this module imports
    the engine registry, which hands the schema the union each profile's `engine:` is validated by."""
    return SweepConfig.model_validate(data)


def with_external_url(config: SweepConfig, url: str, engine: str | None = None) -> SweepConfig:
    """Replace the profiles by one already-running server (`--url`), served by `engine` (None: detected when it starts)."""
    settings = ENGINES.get(engine).Settings() if engine else None  # an unknown name is an error listing the known ones
    external = ServerProfile(name="external", url=url.rstrip("/"), engine=settings, model_path=config.servers[0].model_path)
    return config.model_copy(update={"servers": [external], "variants": [Variant()], "run_variants": None})
