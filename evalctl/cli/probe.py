"""`evalctl probe`: does a cached prefix change what the server computes? Cold vs warm, per prefix length."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalctl.cli.common import console, err, fail
from evalctl.cli.options import ApiKey, ConfigFile, Engine, Model, Overrides, Url, comma_ints, config_options, resolve_config, url_engine
from evalctl.errors import ExitCode

if TYPE_CHECKING:
    from evalctl.probe.session import ServerProbe

# The worst outcome over the servers probed decides the exit status (a failure outranks a probe
# that could not run, which outranks an undecided one).
PROBE_EXIT = {"fail": ExitCode.REGRESSION, "not run": ExitCode.RUN_FAILED, "inconclusive": ExitCode.INCONCLUSIVE}


@config_options("task", "shots", "output", "data_dir")
def probe(
    model: Model = None,
    config: ConfigFile = None,
    url: Url = None,
    engine: Engine = None,
    overrides: Overrides | None = None,
    prefix_tokens: Annotated[
        str | None, typer.Option(parser=comma_ints, metavar="<int,...>", help="Extra synthetic prefix lengths in tokens, comma-separated.")
    ] = None,
    questions: Annotated[int | None, typer.Option(help="Questions per prefix-length bin (default 1).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Greedy tokens per generation (default 16).")] = None,
    policy: Annotated[Path | None, typer.Option(help="YAML with probe thresholds (top level or under `probe:`).")] = None,
    api_key: ApiKey = None,
) -> None:
    """Generate each probe prompt greedily cold (twice) and warm (prefix cached), and compare per prefix-length bin.

    Bins: the task's few-shot prefix at each shot count, plus synthetic prefixes just below and
    above the engine's prefill chunk size when it is known. A bin fails when warm output departs
    from cold by more than cold departs from a cold repeat, beyond the policy's tolerance. With
    --url alone (no --model or --config) the shot counts are 1, 2, 4 and 8 unless --shots says.
    Exit status (table: evalctl --help): PASS; REGRESSION when a bin diverges; INCONCLUSIVE when the cache
    hit could not be verified; RUN_FAILED when a server or the probe could not run; BAD_INPUT.
    """
    from evalctl.config import url_config
    from evalctl.manifest import new_run_id
    from evalctl.probe.policy import load_probe_policy
    from evalctl.probe.session import probe_servers
    from evalctl.servers.detect import served_model
    from evalctl.tasks.lmeval import task_of

    if model is None and config is None:
        if url is None:
            raise fail("give --model NAME, --config FILE or --url URL")
        cfg = url_config(url, engine or url_engine(url, api_key), served_model(url, api_key), overrides)
    else:
        cfg = resolve_config(model, config, url, overrides, engine, api_key)
    rules = load_probe_policy(policy, {"max_tokens": max_tokens, "questions_per_bin": questions, "prefix_tokens": prefix_tokens})
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
    from evalctl.report.terminal import probe_bins_table

    result = probed.result
    if result is None:
        err.print(f"[red]error:[/red] {probed.label}: {probed.error}", highlight=False)
        return "not run"
    console.print(probe_bins_table(result.bins, f"Probe {probed.label}: cold vs warm by prefix length (tokens)"))
    for row in result.bins[result.bins["reason"] != ""].to_dict("records"):
        console.print(f"  {row['bin']}: {row['reason']}", highlight=False)
    console.print(
        f"{probed.label}: {result.verdict}; failed bins: {', '.join(result.failed_bins) or 'none'}; "
        f"{result.generated_tokens} generated tokens in {result.wall_s:.0f}s; {run_dir / probed.file}",
        highlight=False,
    )
    return result.verdict
