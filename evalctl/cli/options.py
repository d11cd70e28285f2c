"""The options that set config fields: one table from option to dotted config key, the help taken from the field.

A command declares its own options (--model, --url, ...) by hand and a parameter `overrides:
Overrides` where the table's options go (`config_options`). Each option's help is its field's
`description` in `evalctl.schema`, so --help and the schema cannot drift apart; its value goes to
`load_config` under the key, where the config model checks it once (an error names the field).
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from evalctl.schema import SweepConfig

Overrides = dict[str, Any]  # dotted config key -> value, for `load_config`


def comma_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"not comma-separated integers: {text!r}") from None


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _gpu_pool(text: str) -> list[str] | int:
    if text.strip().isdigit():
        return int(text)
    if "," not in text:
        raise typer.BadParameter(f"GPU ids (0,1,2,3) or a count (8), got {text!r}")
    return _names(text)


def _task(text: str) -> str:
    # A task YAML is recorded by its absolute path, so a resume from another folder finds it.
    return str(Path(text).resolve()) if text.endswith((".yaml", ".yml")) else text


def _sequential(on: bool) -> str | None:
    return "sequential" if on else None  # off: the config's mode


@dataclass(frozen=True)
class ConfigOption:
    """One option: the config key it sets, the type Typer reads, and `parse` from that to the config's value."""

    key: str
    kind: type = str
    parse: Callable[[Any], Any] | None = None
    metavar: str | None = None
    decls: tuple[str, ...] = ()  # default: --<parameter name>
    note: str = ""  # what the option adds to the field's description (the text's form)
    panel: str | None = None
    default: bool | None = None  # a plain flag's: False

    def help(self) -> str:
        model: type[BaseModel] = SweepConfig
        *sections, leaf = self.key.split(".")
        for section in sections:
            model = model.model_fields[section].annotation
        return f"{model.model_fields[leaf].description} {self.note}".strip() + f" (config: {self.key})"

    def parameter(self, name: str) -> inspect.Parameter:
        info = typer.Option(*self.decls, help=self.help(), metavar=self.metavar, rich_help_panel=self.panel)
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=self.default, annotation=Annotated[self.kind | None, info])


CSV, SLURM = "Comma-separated.", "Slurm"
# Parameter name -> option. The sweep takes them all; probe and servers show the ones they share.
OPTIONS = {
    "task": ConfigOption("task", parse=_task),
    "include_path": ConfigOption("include_path", Path, parse=Path.resolve),
    "shots": ConfigOption("shots", parse=comma_ints, metavar="<int,...>", note=CSV),
    "cache": ConfigOption("cache", parse=_names, metavar="<on,off>", note=CSV),
    "limit": ConfigOption("limit", int),
    "limit_order": ConfigOption("limit_order"),
    "passes": ConfigOption("passes", int),
    "concurrency": ConfigOption("concurrency", int),
    "fewshot": ConfigOption("fewshot"),
    "max_tokens": ConfigOption("generation.max_tokens", int),
    "output": ConfigOption("output_dir", Path, decls=("--output", "-o")),
    "data_dir": ConfigOption("data_dir", Path),
    "variants": ConfigOption("run_variants", parse=_names, metavar="<str,...>", decls=("--variants",), note=CSV),
    "gpus": ConfigOption("gpus", parse=_gpu_pool, metavar="<ids|count>", note="On the command line: 0,1,2,3 or 8."),
    "max_restarts": ConfigOption("max_restarts", int),
    "noise": ConfigOption("noise", bool, decls=("--noise/--no-noise",)),
    "partition": ConfigOption("slurm.partition", panel=SLURM),
    "account": ConfigOption("slurm.account", panel=SLURM),
    "qos": ConfigOption("slurm.qos", panel=SLURM),
    "time_limit": ConfigOption("slurm.time", decls=("--time",), panel=SLURM),
    "cpus_per_task": ConfigOption("slurm.cpus_per_task", int, panel=SLURM),
    "sequential": ConfigOption("stopping.mode", bool, _sequential, decls=("--sequential",), default=False, note="With --baseline."),
    "baseline": ConfigOption("stopping.baseline", Path, parse=Path.resolve),
    "canary": ConfigOption("canary", metavar="FAULT"),
}


def overrides_of(given: dict[str, Any]) -> Overrides:
    """The options given (parameter name -> value) as config overrides, each read by its `parse`; unset ones left out."""
    out = {}
    for name, value in given.items():
        option = OPTIONS[name]
        if value is not None and option.parse is not None:
            try:
                value = option.parse(value)
            except typer.BadParameter as exc:
                exc.param_hint = f"'{(option.decls or ('--' + name.replace('_', '-'),))[0]}'"
                raise
        if value is not None:
            out[option.key] = value
    return out


def config_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the table's options `names` in place of its `overrides` parameter, which receives them."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        added = [OPTIONS[name].parameter(name) for name in names]
        own = inspect.signature(command, eval_str=True).parameters.values()
        params = [q.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own for q in (added if p.name == "overrides" else [p])]

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            overrides = overrides_of({name: kwargs.pop(name) for name in names})
            return command(**kwargs, overrides=overrides)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return wrap


# The options commands share that set no config field.
class Executor(str, enum.Enum):
    local = "local"
    slurm = "slurm"


def gate_policy_option(use: str = "") -> Any:
    """The --policy of a command that judges a run; `use`: what the policy decides there, if not the verdict."""
    text = f"Gate policy, a name (cpu-smoke; evalctl models list) or a YAML path{use}; default: the run config's gate_policy, else"
    return Annotated[str | None, typer.Option("--policy", "-p", help=text + " the built-in (packaged gate/default).")]


Model = Annotated[str | None, typer.Option("--model", "-m", help="Model alias (e.g. smollm2-135m; evalctl models list).")]
ConfigFile = Annotated[Path | None, typer.Option("--config", "-c", help="Sweep config YAML file (instead of --model).")]
Url = Annotated[str | None, typer.Option(help="Use an already-running OpenAI-compatible server at this base URL instead of launching one.")]
Engine = Annotated[
    str | None,
    typer.Option(
        metavar="<engine>",
        help="With --url: the engine behind it, a registered engine such as llamacpp, sglang or vllm (its cache switches then apply);"
        " default: asked of the server.",
    ),
]
ApiKey = Annotated[
    str | None,
    typer.Option(
        envvar=["EVALCTL_API_KEY", "OPENAI_API_KEY"], show_envvar=True, help="Bearer token sent to the server; never written to disk."
    ),
]


def url_engine(url: str, api_key: str | None) -> str | None:
    """The engine serving `url`, as the server says; printed for the record."""
    from evalctl.cli.common import err
    from evalctl.servers.detect import url_engine as detect

    engine, route = detect(url, api_key)
    err.print(f"engine at {url}: {engine or 'unknown'}" + (f" (answered {route})" if route else " (none of the known engines answered)"))
    return engine


def resolve_config(
    model: str | None, config: Path | None, url: str | None, overrides: Overrides, engine: str | None = None, api_key: str | None = None
) -> SweepConfig:
    """The config from --model/--config and the options; with `url`, its one server is there (`engine`, else detected)."""
    from evalctl.config import load_config, with_external_url

    resolved = load_config(model=model, config_file=config, overrides=overrides)
    return with_external_url(resolved, url, engine or url_engine(url, api_key)) if url else resolved
