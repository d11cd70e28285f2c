"""The options that set config fields, generated from the config model; and the options commands share.

A field marked `Cli` in `evalctl.schema`, or in a registered engine's settings (a plug-in's too),
is an option: named after the field unless the marker names it, typed by its annotation, its help
the field's description and its default the field's. Its value goes to `load_config` under the
field's dotted key, where the model checks it once (an error names the field); `--set KEY=VALUE`
reaches any field so. A command takes them through `config_options` in place of its parameter
`overrides: Overrides`.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evalctl.config import EACH_ENGINE
from evalctl.errors import BadInput
from evalctl.schema import Cli, SweepConfig

Overrides = dict[str, Any]  # dotted config key -> value, for `load_config`
KEYWORD = inspect.Parameter.KEYWORD_ONLY


def comma_ints(text: str, option: str | None = None) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"not comma-separated integers: {text!r}", param_hint=option and f"'{option}'") from None


def _bare(annotation: Any) -> Any:
    """`annotation` without its `| None`."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else annotation
    return annotation


def _choices(kind: Any) -> list[str] | None:
    if get_origin(kind) is Literal:
        return [str(a) for a in get_args(kind)]
    return [m.value for m in kind] if isinstance(kind, type) and issubclass(kind, enum.Enum) else None


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(_shown, value))
    return str(value.value if isinstance(value, enum.Enum) else value)


@dataclass(frozen=True)
class ConfigOption:
    """One option: the config key it sets, the field it comes from and the field's `Cli` marker."""

    key: str
    field: FieldInfo
    cli: Cli
    panel: str | None = None
    engines: tuple[str, ...] = ()  # an engine setting's: the engines that take it

    @property
    def kind(self) -> Any:
        return _bare(self.field.annotation)

    @property
    def flags(self) -> tuple[str, ...]:
        return self.cli.flags or ("--" + self.key.rpartition(".")[2].replace("_", "-"),)

    @property
    def name(self) -> str:
        """The command parameter's: the long flag's."""
        return self.flags[0].removeprefix("--").replace("-", "_")

    def help(self) -> str:
        note = " Comma-separated, or a count." if self.cli.count else " Comma-separated." if get_origin(self.kind) is list else ""
        where = self.key + (f": {self.cli.selects}" if self.cli.selects else "")
        if self.engines:
            where += f" of each profile whose engine takes it: {', '.join(self.engines)}"
        default = None if self.cli.selects else self.field.get_default(call_default_factory=True)
        if isinstance(default, bool):
            where += f"; default {'--' if default else '--no-'}{self.flags[0].removeprefix('--')}"
        elif default is not None:  # the field's, which a config file may set otherwise
            where += f"; default {_shown(default)}"
        return f"{self.field.description or ''}{note} (config: {where})".lstrip()

    def parameter(self) -> inspect.Parameter:
        kind, metavar, flags = self.kind, self.cli.metavar, self.flags
        if kind is bool and not self.cli.selects:
            flags = (f"{flags[0]}/--no-{flags[0].removeprefix('--')}", *flags[1:])
        elif self.cli.selects:
            kind = bool
        elif get_origin(kind) is list:  # comma-separated text: <int,...>, or the choices <on,off>
            item = get_args(kind)[0]
            kind, metavar = str, metavar or f"<{','.join(_choices(item) or [f'{item.__name__},...'])}>"
        elif choices := _choices(kind):
            kind, metavar = str, metavar or f"<{'|'.join(choices)}>"
        info = typer.Option(*flags, help=self.help(), metavar=metavar, rich_help_panel=self.panel)
        default = False if self.cli.selects else None  # None: not given, the config's value stands
        return inspect.Parameter(self.name, KEYWORD, default=default, annotation=Annotated[kind | None, info])

    def value(self, given: Any) -> Any:
        """What the option gave, as the config takes it; None when it was not given."""
        if given is None or given is False and self.cli.selects:
            return None
        if self.cli.selects:
            return self.cli.selects
        if get_origin(self.kind) is list:
            if self.cli.count and given.strip().isdigit():
                return int(given)
            if get_args(self.kind)[0] is int:
                return comma_ints(given, self.flags[0])
            return [x.strip() for x in given.split(",") if x.strip()]
        if self.cli.absolute and (self.kind is Path or Path(given).suffix in (".yaml", ".yml")):  # a task YAML, by its path
            return type(given)(Path(given).resolve())  # str stays str, Path Path
        return given


def _model_options(model: type[BaseModel], prefix: str = "", panel: str | None = None) -> Iterator[ConfigOption]:
    """The options of `model`'s marked fields, its sections' (fields that are models) included."""
    for name, field in model.model_fields.items():
        cli = next((m for m in field.metadata if isinstance(m, Cli)), None)
        kind = _bare(field.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _model_options(kind, f"{prefix}{name}.", cli.panel if cli else panel)
        elif cli is not None:
            yield ConfigOption(prefix + name, field, cli, cli.panel or panel)


def _engine_options() -> Iterator[ConfigOption]:
    """The options of the registered engines' marked settings: one per setting, naming every engine that takes it."""
    from evalctl.servers.registry import engines

    try:
        adapters = engines()
    except BadInput:  # a plug-in that does not import: the command that reads the config says so
        return
    marked = {o.key: o for adapter in adapters for o in _model_options(adapter.Settings, EACH_ENGINE, "Engine settings")}
    for key, option in marked.items():
        setting = key.removeprefix(EACH_ENGINE)
        yield replace(option, engines=tuple(a.name for a in adapters if setting in a.Settings.model_fields))


def _by_name(options: list[ConfigOption]) -> dict[str, ConfigOption]:
    out: dict[str, ConfigOption] = {}
    for option in options:
        if option.name in out:
            raise BadInput(f"config fields {out[option.name].key} and {option.key} both make the option --{option.name}")
        out[option.name] = option
    return out


# Parameter name -> option. The sweep takes them all; probe and servers show the ones they share.
OPTIONS = _by_name([*_model_options(SweepConfig), *_engine_options()])

Set = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Set any config field: KEY its dotted name (generation.temperature, slurm.mem_gb, servers.0.port), VALUE YAML "
        "([8, 16], true, null); repeatable. The fields: docs/configs.md.",
    ),
]


def key_values(pairs: list[str] | None, option: str) -> list[tuple[str, str]]:
    """The KEY=VALUE pairs a repeatable `option` was given, split; a pair with no `=` or no key is a usage error."""
    out = []
    for pair in pairs or []:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise typer.BadParameter(f"not KEY=VALUE: {pair!r}", param_hint=f"'{option}'")
        out.append((key.strip(), value))
    return out


def _set_fields(pairs: list[str], given: Overrides) -> Overrides:
    """`--set` pairs as overrides, each value read as YAML; a field an option also sets is a usage error."""
    out = {}
    for key, text in key_values(pairs, "--set"):
        if key in given:
            raise typer.BadParameter(f"{key} is set by an option as well", param_hint="'--set'")
        try:
            out[key] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise typer.BadParameter(f"{key}: not a YAML value: {exc}", param_hint="'--set'") from None
    return out


def overrides_of(given: dict[str, Any], pairs: list[str]) -> Overrides:
    """The options given (parameter name -> value; None: not given) and the --set pairs as config overrides."""
    values = {OPTIONS[name].key: OPTIONS[name].value(value) for name, value in given.items()}
    overrides = {key: value for key, value in values.items() if value is not None}
    return overrides | _set_fields(pairs, overrides)


def config_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the options `names` (default: all) and --set, in place of its `overrides` parameter, which receives them."""
    chosen = [OPTIONS[name] for name in names or OPTIONS]

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(command, eval_str=True).parameters.values()
        added = [o.parameter() for o in chosen] + [inspect.Parameter("set_fields", KEYWORD, default=None, annotation=Set)]
        clash = {p.name for p in own} & {p.name for p in added}
        if clash:
            raise TypeError(f"{command.__name__}: its own parameters {sorted(clash)} are config options too")
        params = [q.replace(kind=KEYWORD) for p in own for q in (added if p.name == "overrides" else [p])]

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            overrides = overrides_of({o.name: kwargs.pop(o.name) for o in chosen}, kwargs.pop("set_fields") or [])
            return command(**kwargs, overrides=overrides)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return wrap


# The options commands share that set no config field.
Executor = Literal["local", "slurm"]


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
