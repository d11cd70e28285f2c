"""Server lifecycle shared by every engine: launch, readiness, logs, teardown.

The server leads its own process group, so a stop reaches every process it spawned (TP workers, vLLM's EngineCore);
a reaper process (servers.reaper) kills that group if evalctl dies without stopping it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from evalctl.client import auth_headers
from evalctl.errors import PortTaken, ServerError
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.base import EngineAdapter, LaunchSpec
from evalctl.servers.detect import detect_engine
from evalctl.servers.registry import adapter_for

# Below the OS's ephemeral range (Linux: 32768-60999), which it hands to outgoing connections: a
# port picked there can be taken by any client socket before the server binds it (CI saw SGLang's
# own pick of its distributed-init port fail with EADDRINUSE).
_PORT_RANGE = (20000, 32000)
# A port is free when drawn, but an engine binds it only once loaded (SGLang: ~50 s on CPU): two
# launches can draw the same one in that window. The loser's port answers for the other's server.
_LAUNCH_ATTEMPTS = 3
_DRAW = random.SystemRandom()  # no library's seeding of `random` makes two processes draw alike


def free_port(host: str = "127.0.0.1", highest: int = 65535, span: int = 1) -> int:
    """The first of `span` consecutive ports free now on `host`, at most `highest`, drawn at random
    below the ephemeral range (else the OS's pick, asked again while it picks higher)."""
    low, high = _PORT_RANGE[0], min(_PORT_RANGE[1], highest) - span + 1
    for port in _DRAW.sample(range(low, high + 1), min(200, max(0, high - low + 1))):
        if not any(port_in_use(host, p) for p in range(port, port + span)):
            return port
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port + span - 1 <= highest and not any(port_in_use(host, p) for p in range(port + 1, port + span)):
            return port
    raise ServerError(f"no free port at most {highest} on {host}: set the profile's `port`")


def _listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` or one it started holds the listening TCP socket on `port`."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for proc in tree:
        try:
            sockets = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(s.status == psutil.CONN_LISTEN and s.laddr and s.laddr.port == port for s in sockets):
            return True
    return False


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class ManagedServer:
    """One running server for one (profile, variant, cache mode)."""

    profile: ServerProfile
    variant: Variant
    cache: CacheMode
    log_path: Path
    devices: tuple[str, ...] = ()  # GPU ids (CUDA_VISIBLE_DEVICES); see servers.gpus
    api_key: str | None = field(default=None, repr=False)  # sent on every call, as the sweep's requests are
    adapter: EngineAdapter = field(init=False)
    spec: LaunchSpec | None = field(init=False, default=None)
    base_url: str = field(init=False, default="")
    process: subprocess.Popen | None = field(init=False, default=None)
    reaper: subprocess.Popen | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # A server at a URL without an engine named gets the one detected when it starts (`start`).
        self.adapter = adapter_for(self.profile.engine.name) if self.profile.engine else EngineAdapter()

    @property
    def request_model(self) -> str:
        """The model name its requests carry (the engine may rename the profile's, e.g. SGLang drops a colon)."""
        return self.adapter.request_model(self.profile.model_path)

    @property
    def launched(self) -> bool:
        return self.process is not None

    @property
    def workdir(self) -> Path:
        """The launch's own folder (llama.cpp's slot files, a launcher's record)."""
        return self.log_path.parent / f"{self.log_path.stem}.slots"

    def http(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=timeout, headers=auth_headers(self.api_key))

    def start(self, on_tick: Callable[[float], None] | None = None) -> None:
        """Launch (unless the profile has a `url`) and wait until healthy, or raise ServerError."""
        if self.profile.url:
            self.base_url = self.profile.url
            self._wait_healthy(on_tick)
            if self.profile.engine is None:
                with self.http() as http:
                    name, _ = detect_engine(http)
                self.adapter = adapter_for(name) if name else EngineAdapter()
            return
        for attempt in range(1, _LAUNCH_ATTEMPTS + 1):
            try:
                self._launch(on_tick)
                return
            except PortTaken:
                if self.profile.port or attempt == _LAUNCH_ATTEMPTS:
                    raise

    def _launch(self, on_tick: Callable[[float], None] | None) -> None:
        host = self.profile.host
        port = self.profile.port or free_port(host, self.adapter.highest_port, self.adapter.ports_needed)
        # A fixed `port` too: the engine binds the ports after it (`ports_needed`) as well.
        taken = [p for p in range(port, port + self.adapter.ports_needed) if port_in_use(host, p)]
        if taken:
            raise ServerError(f"port {taken[0]} on {host} is already in use; pick another `port` or omit it for a free one")
        workdir = self.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.spec = self.adapter.launch_spec(self.profile, self.variant, self.cache, port, str(workdir), self.devices)
        self.base_url = f"http://{host}:{port}"
        self.process = None  # a restart replaces the dead one
        log = open(self.log_path, "ab")
        try:
            # A stop signal arriving between fork and `self.process = ...` would leave a server
            # nobody owns: hold signals for that instant (they are delivered right after).
            with _stop_signals_blocked():
                self.process = subprocess.Popen(
                    self.spec.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **self.spec.env},
                    start_new_session=True,
                    preexec_fn=_in_child,
                )
                self.reaper = _start_reaper(self.process.pid)
            self._wait_healthy(on_tick, port)
            # Unless the launched tree holds the listening socket, another launch's server answered. Behind a
            # `command_prefix` (a container runtime, srun) the listener is the runtime's, outside the tree: not checked.
            if not self.variant.command_prefix and not _listens_on(self.process.pid, port):
                raise self._port_taken(port, f"server {self.profile.name} is not the one listening")
        except OSError as exc:
            if self.process is not None:
                self.stop()
                raise
            raise ServerError(f"cannot launch {self.spec.argv[0]}: {exc.strerror}") from exc
        except BaseException:
            self.stop()
            raise
        finally:
            log.close()

    def _port_taken(self, port: int, what: str) -> PortTaken:
        return PortTaken(
            f"port {port} on {self.profile.host} answers for a server evalctl did not start ({what});"
            " another launch took the same free port first",
            exit_code=self.process.poll(),
            log_tail=tail(self.log_path),
        )

    def _wait_healthy(self, on_tick: Callable[[float], None] | None, port: int | None = None) -> None:
        started = time.monotonic()
        deadline = started + self.profile.startup_timeout_s
        with self.http(timeout=5.0) as http:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    code = self.process.returncode
                    message = f"server {self.profile.name} exited with code {code} during start-up"
                    if port is not None and port_in_use(self.profile.host, port):
                        # It lost a race for its port (EADDRINUSE): the launch that won listens there.
                        raise self._port_taken(port, message)
                    raise ServerError(message, exit_code=code, log_tail=tail(self.log_path))
                try:
                    if http.get(self.adapter.health_path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"server {self.profile.name} not healthy after {self.profile.startup_timeout_s:.0f}s"
                        f" at {self.base_url}{self.adapter.health_path}",
                        log_tail=tail(self.log_path),
                    )
                if on_tick:
                    on_tick(time.monotonic() - started)
                time.sleep(0.25)

    def exit_code(self) -> int | None:
        """None while running (or at a URL); the exit code once it has died."""
        return None if self.process is None else self.process.poll()

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the whole process group (start_new_session: the server leads it), SIGKILL what is left after the
        grace period."""
        proc = self.process
        if proc is None:
            return
        try:
            for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline:
                    if proc.poll() is not None and not _group_alive(proc.pid):
                        return
                    time.sleep(0.05)
            proc.poll()
        finally:
            if self.reaper is not None:
                self.reaper.kill()
                self.reaper.wait()


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


@contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _in_child() -> None:
    """In the forked server before exec: undo the inherited mask, and die with the evalctl thread that started it,
    even by `kill -9` (PDEATHSIG), so no server outlives its sweep (engines' own workers watch their parent)."""
    _unblock_signals()
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _start_reaper(pgid: int) -> subprocess.Popen:
    """The group's reaper (servers.reaper), in a session of its own: a terminal's Ctrl-C (sent to evalctl's group)
    leaves it to do its job."""
    return subprocess.Popen(
        [sys.executable, "-m", "evalctl.servers.reaper", str(os.getpid()), str(pgid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=_unblock_signals,
    )  # fmt: skip


def _unblock_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
