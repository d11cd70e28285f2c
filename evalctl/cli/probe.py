"""`evalctl probe`: does a cached prefix change what the server computes? Cold vs warm, per prefix length."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from evalctl.cli.common import console, err, fail
from evalctl.cli.sweep import DATA_DIR_HELP, ENGINE_HELP, _csv_ints, resolve_config, served_model, url_engine
from evalctl.config import SweepConfig, with_external_url
from evalctl.errors import ExitCode
from evalctl.report.terminal import add_column, narrow_table

if TYPE_CHECKING:
    from evalctl.probe.session import ServerProbe

# The worst outcome over the servers probed decides the exit status (a failure outranks a probe
# that could not run, which outranks an undecided one).
PROBE_EXIT = {"fail": ExitCode.REGRESSION, "not run": ExitCode.RUN_FAILED, "inconclusive": ExitCode.INCONCLUSIVE}


def _policy(path: Path | None, max_tokens: int | None, questions: int | None, prefix_tokens: list[int] | None):
    from pydantic import ValidationError

    from evalctl.config_files import read_yaml
    from evalctl.probe.policy import ProbePolicy

    data: dict = {}
    if path is not None:
        loaded = read_yaml(path, "probe policy")
        data = loaded.get("probe", loaded)  # a gate policy file keeps the probe's thresholds under `probe:`
        if not isinstance(data, dict):
            raise fail(f"probe policy {path}: `probe:` must be a mapping")
    for key, value in (("max_tokens", max_tokens), ("questions_per_bin", questions), ("prefix_tokens", prefix_tokens)):
        if value is not None:
            data[key] = value
    try:
        return ProbePolicy.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise fail(f"invalid probe policy: {fields}") from None


def _fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _bins_table(bins, title: str) -> Table:
    columns = [("bin", "bin"), ("prefix_tokens", "prefix"), ("cached_tokens", "cached"), ("mismatch", "warm≠"),
               ("baseline_mismatch", "cold≠"), ("first_divergence", "div@"), ("js", "JS warm"), ("baseline_js", "JS cold"),
               ("verdict", "verdict")]  # fmt: skip
    rows = [[_fmt(row.get(k), 3 if k in ("js", "baseline_js") else 2) for k, _ in columns] for row in bins.to_dict("records")]
    table = narrow_table(title)
    for i, (key, header) in enumerate(columns):
        add_column(table, header, [r[i] for r in rows], numeric=key not in ("bin", "verdict"))
    style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
    for cells in rows:
        cells[-1] = f"[{style.get(cells[-1], '')}]{cells[-1]}[/]"
        table.add_row(*cells)
    return table


def probe(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model alias (e.g. smollm2-135m; evalctl models list).")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Sweep config YAML file (instead of --model).")] = None,
    url: Annotated[str | None, typer.Option(help="Probe an already-running server at this base URL instead of launching one.")] = None,
    engine: Annotated[str | None, typer.Option(metavar="<engine>", help=ENGINE_HELP)] = None,
    task: Annotated[str | None, typer.Option(help="Task whose prompts are probed: gsm8k or prefix-recall (default: the config's).")] = None,
    shots: Annotated[str | None, typer.Option(help="Few-shot counts to probe (default: the config's; 1,2,4,8 with --url alone).")] = None,
    prefix_tokens: Annotated[str | None, typer.Option(help="Extra synthetic prefix lengths in tokens, comma-separated.")] = None,
    questions: Annotated[int | None, typer.Option(help="Questions per prefix-length bin (default 1).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Greedy tokens per generation (default 16).")] = None,
    policy: Annotated[Path | None, typer.Option(help="YAML with probe thresholds (top level or under `probe:`).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Results root; a folder with probe.json is created inside.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help=DATA_DIR_HELP)] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar=["EVALCTL_API_KEY", "OPENAI_API_KEY"], show_envvar=True, help="Bearer token; never written.")
    ] = None,
) -> None:
    """Generate each probe prompt greedily cold (twice) and warm (prefix cached), and compare per prefix-length bin.

    Bins: the task's few-shot prefix at each shot count, plus synthetic prefixes just below and
    above the engine's prefill chunk size when it is known. A bin fails when warm output departs
    from cold by more than cold departs from a cold repeat, beyond the policy's tolerance.
    Exit status (table: evalctl --help): PASS; REGRESSION when a bin diverges; INCONCLUSIVE when the cache
    hit could not be verified; RUN_FAILED when a server or the probe could not run; BAD_INPUT.
    """
    from evalctl.manifest import new_run_id
    from evalctl.probe.session import probe_servers
    from evalctl.tasks.lmeval import task_of

    overrides = {"task": task, "shots": _csv_ints(shots, "--shots"), "output_dir": output, "data_dir": data_dir}
    if model is None and config is None:
        if url is None:
            raise fail("give --model NAME, --config FILE or --url URL")
        cfg = SweepConfig.model_validate(
            {"model": "external", "shots": [1, 2, 4, 8], **{k: v for k, v in overrides.items() if v is not None},
             "servers": [{"name": "external", "url": url.rstrip("/"), "model_path": served_model(url, api_key)}]}
        )  # fmt: skip
        cfg = with_external_url(cfg, url, engine or url_engine(url, api_key))
    else:
        cfg = resolve_config(model, config, url, overrides, engine, api_key)
    rules = _policy(policy, max_tokens, questions, _csv_ints(prefix_tokens, "--prefix-tokens"))
    task = task_of(cfg, fewshot="shared")
    run_dir = Path(cfg.output_dir) / new_run_id(f"{cfg.model}-probe")
    run_dir.mkdir(parents=True, exist_ok=False)
    verdicts = []
    with console.status("probing") as status:
        for probed in probe_servers(cfg, task, run_dir, api_key=api_key, policy=rules, on_step=status.update):
            verdicts.append(_print_probe(probed, run_dir))
    for outcome, status in PROBE_EXIT.items():
        if outcome in verdicts:
            raise typer.Exit(status)


def _print_probe(probed: ServerProbe, run_dir: Path) -> str:
    """Print one server's probe (or why it did not run); its verdict, "not run" when it did not."""
    result = probed.result
    if result is None:
        err.print(f"[red]error:[/red] {probed.label}: {probed.error}", highlight=False)
        return "not run"
    console.print(_bins_table(result.bins, f"Probe {probed.label}: cold vs warm by prefix length (tokens)"))
    for row in result.bins[result.bins["reason"] != ""].to_dict("records"):
        console.print(f"  {row['bin']}: {row['reason']}", highlight=False)
    console.print(
        f"{probed.label}: {result.verdict}; failed bins: {', '.join(result.failed_bins) or 'none'}; "
        f"{result.generated_tokens} generated tokens in {result.wall_s:.0f}s; {run_dir / probed.file}",
        highlight=False,
    )
    return result.verdict
