"""`evalctl sweep`: resolve the config, run the plan, print the run's tables."""

from __future__ import annotations

import enum
import errno
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalctl.cli.common import console, err, fail
from evalctl.config import CacheMode, SweepConfig, load_config, with_external_url
from evalctl.errors import DiskError, ExitCode

if TYPE_CHECKING:
    from evalctl.execution import SweepResult
    from evalctl.runs import Run


def _csv_ints(text: str | None, name: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"{name} must be comma-separated integers, got {text!r}") from None


def _csv(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


class Executor(str, enum.Enum):
    local = "local"
    slurm = "slurm"


DATA_DIR_HELP = (
    "Dataset folder with train.jsonl and test.jsonl, or 'hub' for the Hugging Face hub (env EVALCTL_DATA_DIR); "
    "default: the pinned copy inside evalctl."
)
GPUS_HELP = "GPUs the sweep may use: ids (0,1,2,3) or a count (8); default: CUDA_VISIBLE_DEVICES, else nvidia-smi."


def config_overrides(*, cache: str | None = None, variants: str | None = None, gpus: str | None = None, **plain: object) -> dict:
    """CLI options as `load_config` overrides; options needing parsing are checked here."""
    if cache is not None:
        modes = _csv(cache) or []
        bad = [m for m in modes if m not in {c.value for c in CacheMode}]
        if bad:
            raise fail(f"--cache takes on and/or off, got {bad}")
    gpu_pool: list[str] | int | None = None
    if gpus is not None:
        if "," in gpus:
            gpu_pool = _csv(gpus)
        elif gpus.strip().isdigit():
            gpu_pool = int(gpus)
        else:
            raise fail(f"--gpus takes GPU ids (0,1,2,3) or a count (8), got {gpus!r}")
    return {"cache": _csv(cache), "run_variants": _csv(variants), "gpus": gpu_pool, **plain}


ENGINE_HELP = (
    "With --url: the engine behind it, a registered engine such as llamacpp, sglang or vllm "
    "(its cache switches then apply); default: asked of the server."
)


def url_engine(url: str, api_key: str | None = None) -> str | None:
    """The engine serving `url`, as the server says (see servers.detect); printed for the record."""
    import httpx

    from evalctl.client import auth_headers
    from evalctl.servers.detect import detect_engine

    with httpx.Client(base_url=url.rstrip("/"), timeout=5.0, headers=auth_headers(api_key)) as http:
        engine, route = detect_engine(http)
    err.print(f"engine at {url}: {engine or 'unknown'}" + (f" (answered {route})" if route else " (none of the known engines answered)"))
    return engine


def served_model(url: str, api_key: str | None = None) -> str:
    """The first model `url` serves (/v1/models), which requests must name: vLLM answers 404 to any other."""
    import httpx

    from evalctl.client import auth_headers

    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=30.0, headers=auth_headers(api_key)) as http:
            return str(http.get("/v1/models").json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return "external"  # a server without the route (llama.cpp's takes any name)


def resolve_config(
    model: str | None, config: Path | None, url: str | None, overrides: dict, engine: str | None = None, api_key: str | None = None
) -> SweepConfig:
    """The config from --model/--config and overrides; with `url`, its one server is there (`engine`, else detected)."""
    resolved = load_config(model=model, config_file=config, overrides=overrides)
    return with_external_url(resolved, url, engine or url_engine(url, api_key)) if url else resolved


def resolve_resume(run_dir: Path, model: str | None, config: Path | None, url: str | None, overrides: dict) -> tuple[SweepConfig, Run]:
    """The config to finish `run_dir` with (its manifest's, or the one named again) and where it stopped."""
    from evalctl.resume import resume_config

    given = resolve_config(model, config, None, overrides) if model or config else None
    return resume_config(run_dir, given, overrides, url)


FLIPS_SHOWN = 10


def print_regressed_flips(run, gate) -> None:
    """The questions behind each regressed cache on vs off cell: what the cache-off server answered and what cache on did."""
    from evalctl.analysis.flips import flipped_questions
    from evalctl.cell import CellKey
    from evalctl.report.terminal import flips_view, frame_table

    # Any per-cell check that regressed (accuracy, or an invalid-answer cap a forgotten prefix also trips) names a cell to show.
    cells = {(c.profile, c.variant, c.shots, c.pass_index) for c in gate.checks if c.shots is not None and c.status == "regression"}
    samples = run.samples[[k in cells for k in zip(run.samples.profile, run.samples.variant, run.samples.shots, run.samples.pass_index)]]
    keys = CellKey.columns("cache")
    flipped = flipped_questions(samples[samples.cache == "off"], samples[samples.cache == "on"], keys, gate.policy.metric)
    if len(flipped):
        title = f"Flipped questions of the regressed cells, cache off -> on ({min(FLIPS_SHOWN, len(flipped))} of {len(flipped)})"
        console.print(frame_table(flips_view(flipped.head(FLIPS_SHOWN), width=40), title))


def sweep(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model alias (e.g. smollm2-135m; evalctl models list).")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Sweep config YAML file (instead of --model).")] = None,
    task: Annotated[
        str | None,
        typer.Option(
            help="An lm-eval generate_until task: gsm8k, prefix-recall (answers read back from records in the prefix; shots "
            "count the records), a task in --include-path, a task YAML file, or a task lm-eval registers."
        ),
    ] = None,
    include_path: Annotated[
        Path | None, typer.Option(help="Folder of lm-eval task YAML to find --task in (lm-eval's --include_path); docs/guide-add-task.md.")
    ] = None,
    shots: Annotated[str | None, typer.Option(help="Few-shot counts, comma-separated, e.g. 8,12,16,20.")] = None,
    cache: Annotated[str | None, typer.Option(help="Prefix-cache modes to run: on,off (or one of them).")] = None,
    limit: Annotated[int | None, typer.Option(help="Questions per cell (default: the config's; all when unset).")] = None,
    limit_order: Annotated[
        str | None,
        typer.Option(
            help="Which questions --limit keeps: shuffled (the first N of a seeded shuffle, the default) or head (the first N, as lm-eval)."
        ),
    ] = None,
    passes: Annotated[int | None, typer.Option(help="Warm passes per cell, run without a cache flush between.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight per server.")] = None,
    fewshot: Annotated[
        str | None,
        typer.Option(
            help="Few-shot mode: shared (first k train examples, one shared prefix) or sampled (lm-eval's per-question sampling)."
        ),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Completion budget per question.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Results root; the run folder is created inside it.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help=DATA_DIR_HELP)] = None,
    url: Annotated[
        str | None, typer.Option(help="Use an already-running OpenAI-compatible server at this base URL instead of launching one.")
    ] = None,
    engine: Annotated[str | None, typer.Option(metavar="<engine>", help=ENGINE_HELP)] = None,
    variants: Annotated[str | None, typer.Option(help="Variants (engine builds) to run, comma-separated, e.g. baseline,patched.")] = None,
    gpus: Annotated[str | None, typer.Option(help=GPUS_HELP)] = None,
    max_restarts: Annotated[
        int | None, typer.Option(help="Restarts of a server that dies mid-launch (with backoff); 0 fails its remaining cells instead.")
    ] = None,
    noise: Annotated[
        bool | None,
        typer.Option(
            "--noise/--no-noise",
            help="A/A arm: run each profile's reference cell twice, cold, on the same server, to measure the engine's own flips "
            "(config noise; the gate then wants a regression to exceed them).",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Finish an interrupted run in this run folder: same run id, only unfinished requests sent. "
            "Its recorded config is used; a --config/--model or option that changes what the records mean is refused."
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar=["EVALCTL_API_KEY", "OPENAI_API_KEY"], show_envvar=True, help="Bearer token sent to the server; never written to disk."
        ),
    ] = None,
    executor: Annotated[
        Executor,
        typer.Option(
            help="local: run here. slurm: submit one job per server profile x variant (GPUs = tp) and an aggregation job "
            "(analysis, gate) to Slurm through submitit; the run folder is created under --output, which the nodes must share."
        ),
    ] = Executor.local,
    partition: Annotated[str | None, typer.Option(help="Slurm partition (config slurm.partition).", rich_help_panel="Slurm")] = None,
    account: Annotated[str | None, typer.Option(help="Slurm account (config slurm.account).", rich_help_panel="Slurm")] = None,
    qos: Annotated[str | None, typer.Option(help="Slurm QoS (config slurm.qos).", rich_help_panel="Slurm")] = None,
    time_limit: Annotated[
        str | None,
        typer.Option("--time", help="Time limit per job, e.g. 04:00:00 (config slurm.time).", rich_help_panel="Slurm"),
    ] = None,
    cpus_per_task: Annotated[
        int | None, typer.Option(help="CPUs per profile x variant job (config slurm.cpus_per_task).", rich_help_panel="Slurm")
    ] = None,
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Stop each cell once its comparison with --baseline is decided (config stopping.mode: sequential), at the"
            " gate policy's tolerance, alpha, metric and min_n unless the config's stopping: sets them.",
        ),
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="An earlier complete run folder that each cell is compared with (config stopping.baseline)."),
    ] = None,
    wait_for_lock: Annotated[
        float | None,
        typer.Option(
            "--wait-for-lock",
            metavar="SECONDS",
            min=0,
            help="With --resume: if another evalctl is writing the run folder, wait up to SECONDS for it to finish "
            "instead of refusing at once (then only what it left undone is sent).",
        ),
    ] = None,
    canary: Annotated[
        str | None,
        typer.Option(
            metavar="FAULT",
            help="Put evalctl's fault proxy in front of every cache-on server (cache-off cells stay healthy), with a fault of "
            "`evalctl canary --help` (lost-prefix, ...). Shows that the gate catches the fault (config canary).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            help="With --executor slurm: block until the aggregation job ends and exit with the gate's verdict status; "
            "without it, print the run id and job ids and return at once.",
            rich_help_panel="Slurm",
        ),
    ] = False,
) -> None:
    """Launch server(s), run the task (GSM8K, prefix-recall or any lm-eval generate_until task)
    at each shot count with the prefix cache on and off, and report.

    Also writes the gate's files (the config's gate_policy, else the default) and report.html into the run folder; the
    sweep's exit status says whether it ran, `evalctl gate` judges it.

    Exit status (table: evalctl --help): PASS when all cells ran; RUN_FAILED when some server or cell
    failed (see summary); BAD_INPUT, also when another evalctl is writing the run folder (it is named;
    see --wait-for-lock); INTERNAL (e.g. the run folder cannot be created, or the disk refused a write:
    the file is named, every row so far is kept, the --resume command is printed); INTERRUPTED or
    TERMINATED by SIGINT/SIGTERM (records so far kept, servers stopped; finish with --resume). With
    --executor slurm: PASS once submitted; with --wait the gate's verdict, RUN_FAILED if no gate result.
    """
    _check_options(executor, wait, canary)
    overrides = config_overrides(
        cache=cache,
        variants=variants,
        gpus=gpus,
        task=str(Path(task).resolve()) if task and task.endswith((".yaml", ".yml")) else task,
        shots=_csv_ints(shots, "--shots"),
        limit=limit,
        limit_order=limit_order,
        passes=passes,
        concurrency=concurrency,
        fewshot=fewshot,
        output_dir=output,
        data_dir=data_dir,
        include_path=include_path.resolve() if include_path else None,
        max_restarts=max_restarts,
        noise=noise,
        canary=canary,
        **{
            "generation.max_tokens": max_tokens,
            "slurm.partition": partition,
            "slurm.account": account,
            "slurm.qos": qos,
            "slurm.time": time_limit,
            "slurm.cpus_per_task": cpus_per_task,
            "stopping.mode": "sequential" if sequential else None,
            "stopping.baseline": baseline.resolve() if baseline else None,
        },
    )
    if resume is None:
        resolved, resume_point = resolve_config(model, config, url, overrides, engine, api_key), None
    else:
        resolved, resume_point = resolve_resume(resume, model, config, url, overrides)
    if executor is Executor.slurm:
        from evalctl.cli.slurm import sweep_on_slurm

        sweep_on_slurm(resolved, resume_point, api_key, wait, wait_for_lock or 0)
        return
    _sweep_here(resolved, resume_point, api_key, wait_for_lock or 0)


def _check_options(executor: Executor, wait: bool, canary: str | None) -> None:
    """What the options alone can refuse, before anything is resolved, written or submitted."""
    if wait and executor is not Executor.slurm:
        raise fail("--wait applies to --executor slurm only")
    if executor is Executor.slurm:
        from evalctl.cluster.slurm import require_slurm

        require_slurm()
    if canary is not None:
        from evalctl.canary.faults import FAULTS

        if canary not in FAULTS:  # said here, not as a fault of the config file
            raise fail(f"unknown --canary fault {canary!r}; known: {', '.join(FAULTS)}")


def _sweep_here(resolved: SweepConfig, resume_point: Run | None, api_key: str | None, wait_for_lock_s: float) -> None:
    """The sweep on this machine: progress bars, stop signals, the writer lock, then the outputs."""
    from evalctl.execution import Sweep
    from evalctl.report.progress import RichProgress
    from evalctl.signals import Interrupted, Shutdown

    shutdown = Shutdown()
    progress = RichProgress(console)
    runner = Sweep(resolved, progress=progress, api_key=api_key, shutdown=shutdown, resume=resume_point, wait_for_lock_s=wait_for_lock_s)
    with runner:  # the run folder's writer lock, held until the report is written
        try:
            with shutdown.install(), progress:
                result = runner.run()
            _finish_sweep(result, resolved)
        except Interrupted as exc:
            where = runner.run_dir
            kept = (
                f"records so far are kept in {where}\nfinish with: {resume_command(where)}"
                if where
                else "before the run folder was created"
            )
            err.print(f"interrupted by {exc.args[0]}; {kept}", highlight=False, soft_wrap=True)  # a path or command copied whole
            raise typer.Exit(exc.exit_status) from None
        except DiskError as exc:
            raise fail(disk_message(exc, runner.run_dir), exc.exit_status) from None


def resume_command(run_dir: Path) -> str:
    return f"evalctl sweep --resume {shlex.quote(str(run_dir))}"


def disk_message(exc: DiskError, run_dir: Path | None) -> str:
    """What a refused write means for the run: which file, what is kept, how to finish."""
    if run_dir is None:
        return f"{exc}; nothing was written"
    from evalctl.records import record_files

    rows = sum(len(p.read_bytes().splitlines()) for p in record_files(run_dir))
    return (
        f"{exc} (errno {errno.errorcode.get(exc.errno, exc.errno)}). Every row written so far is safe: {rows} in {run_dir}; "
        f"servers are stopped. Free space (or fix the permission), then finish the run with:\n  {resume_command(run_dir)}"
    )


def _finish_sweep(result: SweepResult, resolved: SweepConfig) -> None:
    """The run's tables, gate files and report, written by the sweep that holds the lock."""
    from evalctl.cli.analyze import print_run_tables
    from evalctl.execution.stopping import sequential_baseline
    from evalctl.report.finish import REPORT_FILE, finish_run
    from evalctl.report.terminal import STATUS_STYLE, tolerance_note, verdict_basis
    from evalctl.runs import load_run

    run = load_run(result.run_dir)  # loaded and summarised once, for the tables, the gate and the report
    # A sequential run's accuracy verdicts are its cells' decisions against the baseline, made
    # during the sweep; the baseline also gives the report its comparison.
    gate = finish_run(run, baseline=sequential_baseline(resolved))
    print_run_tables(run, gate)
    for failure in result.failures:
        err.print(f"[red]failed:[/red] {failure.server}: {failure.error}")
    if gate.verdict == "regression":
        print_regressed_flips(run, gate)
    policy = resolved.gate_policy or "default"
    console.print(
        f"gate ({policy} policy, {tolerance_note(gate.policy)}): [{STATUS_STYLE[gate.verdict]}]{gate.verdict}[/]"
        f" - details: evalctl gate {result.run_dir}",
        highlight=False,
    )
    if resolved.canary:
        console.print(f"canary run: {resolved.canary} was injected in front of the cache-on servers on purpose", highlight=False)
    console.print(f"verdict rests on: {verdict_basis(gate)}", highlight=False, markup=False)  # "[cpu/default ...]" is not a style
    console.print(f"report: {result.run_dir / REPORT_FILE}")
    console.print(f"run folder: {result.run_dir}")
    if result.failures:
        raise typer.Exit(ExitCode.RUN_FAILED)
