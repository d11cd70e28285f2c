"""One server launch of a sweep: start it, restart it when it dies (with backoff), stop it; its manifest entry.

Launched servers are watched while requests run (`dispatch.send_watched`); here they are
started again, up to `max_restarts` times per launch, before the launch fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from evalctl import venvs
from evalctl.canary.proxy import Canary, CanaryServer
from evalctl.cell import CellKey
from evalctl.execution.folder import RunFolder
from evalctl.execution.progress import SweepProgress
from evalctl.manifest import RestartEntry, ServerEntry, now
from evalctl.plan import ServerLaunch
from evalctl.schema import CacheMode, SweepConfig
from evalctl.secrets import redact_argv, redact_env
from evalctl.servers.process import ManagedServer, ServerError, tail
from evalctl.signals import Shutdown

# Server stop: SIGTERM grace before SIGKILL; shorter when the user is waiting on a signal.
STOP_GRACE_S = 10.0
STOP_GRACE_INTERRUPTED_S = 3.0
# Longest wait for a record-only answer (server info, metrics).
RECORD_TIMEOUT_S = 60.0
# First wait before restarting a dead server; doubles per restart of the same launch.
RESTART_BACKOFF_S = 1.0


def for_the_record(server: ManagedServer, what: str, ask: Callable[[httpx.Client], dict]) -> dict:
    """Ask the server for something kept only for the record: a failure is noted, never fatal."""
    try:
        # Generous: a loaded CPU engine answered vLLM's /server_info in more than 10 s.
        with server.http(timeout=RECORD_TIMEOUT_S) as http:
            return ask(http)
    except Exception as exc:  # a server without info or metrics still serves
        return {"error": f"{what} unavailable: {exc}"}


def server_metrics(server: ManagedServer) -> dict:
    """The engine's Prometheus counters now (cache hit rate, cached tokens); {} for engines without, or a dead server."""
    if server.exit_code() is not None:
        return {}
    return for_the_record(server, "metrics", server.adapter.scrape_metrics)


class Launch:
    """A server for one launch (profile x variant x cache) and its manifest entry, which `save` persists."""

    def __init__(
        self,
        launch: ServerLaunch,
        folder: RunFolder,
        devices: tuple[str, ...],
        config: SweepConfig,
        progress: SweepProgress,
        shutdown: Shutdown,
        api_key: str | None,
    ):
        self.launch, self.label = launch, launch.label
        self.progress, self.save, self.check = progress, folder.save, shutdown.check  # check: a stop signal
        slug = f"{launch.profile.name}-{launch.variant.name}-cache-{launch.cache.value}"
        self.server = ManagedServer(launch.profile, launch.variant, launch.cache, folder.path / f"server-{slug}.log", devices, api_key)
        self.entry = ServerEntry(
            profile=launch.profile.name,
            variant=launch.variant.name,
            cache=launch.cache.value,
            engine=self.server.adapter.name,
            gpu=launch.profile.gpu,
            devices=list(devices),
            variant_git_revision=launch.variant.git_revision,
            deterministic=launch.profile.deterministic,
        )
        self.max_restarts = config.max_restarts
        # The fault proxy stands in front of cache-on servers only: cache-off cells stay the healthy reference.
        self.canary = config.canary if launch.cache is CacheMode.on else None
        self.proxy: CanaryServer | None = None

    def _starting(self, elapsed: float) -> None:
        self.check()  # a stop signal while a server side by side starts: raised in this launch's thread (`signals`)
        self.progress.server_starting(self.label, elapsed)

    def start(self) -> None:
        server, entry = self.server, self.entry
        server.start(on_tick=self._starting)
        entry.argv = redact_argv(server.spec.argv) if server.spec else None
        entry.env = redact_env(server.spec.env) if server.spec else {}
        entry.url = server.base_url
        entry.engine = server.adapter.name  # a server at a URL: the engine detected there (None: none known)
        entry.log = server.log_path.name if server.launched else None
        entry.info = for_the_record(server, "server info", server.adapter.server_info)
        if self.launch.variant.pip:
            entry.venv = venvs.ready(self.launch.variant.pip)
        if server.launched:
            record = server.adapter.launch_record(server.workdir)
            entry.info.update({k: v for k, v in record.info.items() if v is not None})
            entry.unset_settings = record.unset_settings
            if record.unset_settings:
                self.progress.warn(
                    f"{self.label}: this build lacks {', '.join(record.unset_settings)}: served without (manifest: unset_settings)"
                )
        if self.canary:
            self._put_canary_in_front()
        entry.engine_version = entry.info.get("version")
        self.save()
        self.progress.server_ready(self.label)

    @property
    def alive(self) -> bool:
        return self.server.exit_code() is None

    def restart(self, cell: CellKey) -> None:
        """Start a server that died during `cell` again, with backoff; ServerError once restarts are spent."""
        code = self.server.exit_code()
        while True:
            if self.entry.restarts >= self.max_restarts:
                raise ServerError(
                    f"server {self.label} died during {cell.label} (exit code {code}) after {self.entry.restarts} restart(s)"
                    f" (max_restarts: {self.max_restarts})",
                    exit_code=code,
                    log_tail=tail(self.server.log_path),
                )
            self.entry.restarts += 1
            self.entry.restart_log.append(RestartEntry(at=now(), cell=cell.label, exit_code=code))
            attempt = f"restart {self.entry.restarts} of {self.max_restarts}"
            self.progress.warn(f"{self.label}: server died during {cell.label} (exit code {code}); {attempt}")
            self.server.stop()  # reap what is left of its process group
            time.sleep(min(RESTART_BACKOFF_S * 2 ** (self.entry.restarts - 1), 60.0))
            try:
                self.start()
                return
            except ServerError as exc:
                code = exc.exit_code

    def failed(self, exc: ServerError) -> None:
        self.entry.status, self.entry.error, self.entry.exit_code, self.entry.log_tail = "failed", exc.args[0], exc.exit_code, exc.log_tail
        self.progress.warn(f"{self.label}: {exc.args[0]}")

    def _put_canary_in_front(self) -> None:
        """Every request of this launch's cells goes through the fault proxy from now on (flushes and health too)."""
        self._stop_canary()
        self.proxy = CanaryServer(Canary(self.server.base_url, self.canary))
        threading.Thread(target=self.proxy.serve_forever, daemon=True, name=f"canary {self.label}").start()
        self.entry.canary, self.entry.canary_url = self.canary, self.proxy.url
        self.server.base_url = self.proxy.url
        self.progress.warn(f"{self.label}: canary {self.canary} in front ({self.proxy.url}): this run injects a fault on purpose")

    def _stop_canary(self) -> None:
        if self.proxy is not None:
            self.proxy.shutdown()
            self.proxy.server_close()
            self.proxy = None

    def stop(self, interrupted: bool) -> None:
        self._stop_canary()
        self.server.stop(grace_s=STOP_GRACE_INTERRUPTED_S if interrupted else STOP_GRACE_S)
        self.save()
