"""Probing servers: prompts -> cold/warm generations -> verdicts -> probe.json, per server; and the servers to probe."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pandas as pd

from evalctl.client import RequestSettings, server_http
from evalctl.fsio import write_atomic
from evalctl.probe.policy import ProbePolicy
from evalctl.probe.prompts import build_prompts
from evalctl.probe.runner import ProbeError, ProbeRunner
from evalctl.probe.verdict import bin_verdicts, overall, sample_rows
from evalctl.schema import CacheMode, ServerProfile, SweepConfig, Variant
from evalctl.servers.process import ManagedServer, ServerError
from evalctl.tasks.lmeval import LmEvalTask
from evalctl.tokens import TokenCounter

PROBE_FILE = "probe.json"


@dataclass
class ProbeResult:
    verdict: str  # pass | fail | inconclusive
    bins: pd.DataFrame
    rows: pd.DataFrame
    generated_tokens: int
    wall_s: float
    info: dict

    @property
    def failed_bins(self) -> list[str]:
        return list(self.bins.loc[self.bins["verdict"] == "fail", "bin"])

    def summary(self) -> dict:
        """What the manifest keeps of a sweep's probe (beside its file), and probe.json opens with."""
        return {
            "verdict": self.verdict,
            "failed_bins": self.failed_bins,
            "generated_tokens": self.generated_tokens,
            "wall_s": round(self.wall_s, 2),
        }

    def write(self, path: Path) -> None:
        # to_json turns NaN into null
        bins, prompts = (json.loads(frame.to_json(orient="records")) for frame in (self.bins, self.rows))
        write_atomic(path, json.dumps({**self.summary(), **self.info, "bins": bins, "prompts": prompts}, indent=2))


def probe_file(config: SweepConfig, profile: ServerProfile, variant: Variant) -> str:
    """probe.json when the config runs one server profile x variant, else probe-<profile>-<variant>.json."""
    single = len(config.servers) * len(config.active_variants()) == 1
    return PROBE_FILE if single else f"probe-{profile.name}-{variant.name}.json"


def probe_managed(
    server: ManagedServer,
    task: LmEvalTask,
    config: SweepConfig,
    out_dir: Path,
    *,
    api_key: str | None = None,
    policy: ProbePolicy | None = None,
    on_step: Callable[[str], None] | None = None,
) -> tuple[ProbeResult, str]:
    """Probe a started server of a sweep config; writes its `probe_file`."""
    started = time.monotonic()
    policy = policy or ProbePolicy()
    model, adapter = server.request_model, server.adapter
    with server_http(server.base_url, api_key, 30.0) as http:
        counter = TokenCounter(http, model)
        try:
            chunk = adapter.prefill_chunk_tokens(http, server.profile)
        except (httpx.HTTPError, ValueError, KeyError):
            chunk = None
        prompts = build_prompts(task, config.shots, policy, counter, chunk)
    request = RequestSettings(model=model, api_key=api_key, timeout_s=config.request_timeout_s)
    run = ProbeRunner(server.base_url, adapter, policy, request, on_step=on_step or (lambda _msg: None)).run(prompts)
    rows = sample_rows(run.samples)
    bins = bin_verdicts(rows, policy)
    info = {
        "url": server.base_url,
        "engine": adapter.name,
        "prefill_chunk_tokens": chunk,
        "token_counts": "server /tokenize" if counter.exact else "estimated (chars/token)",
        "cache_flushed": run.flushed,
        "divergence_unit": "tokens" if rows["logprobs"].all() else "characters (no logprobs returned)",
        "policy": policy.model_dump(),
    }
    result = ProbeResult(overall(bins), bins, rows, run.generated_tokens, time.monotonic() - started, info)
    name = probe_file(config, server.profile, server.variant)
    result.write(out_dir / name)
    return result, name


@dataclass(frozen=True)
class ServerProbe:
    """The probe of one profile x variant: its result and file, or why it could not run."""

    label: str
    result: ProbeResult | None = None
    file: str | None = None
    error: str | None = None


def probe_servers(
    config: SweepConfig,
    task: LmEvalTask,
    out_dir: Path,
    *,
    api_key: str | None = None,
    policy: ProbePolicy | None = None,
    on_step: Callable[[str], None] | None = None,
) -> Iterator[ServerProbe]:
    """Start each profile x variant the config runs (cache on), probe it, stop it; one ServerProbe each, as they finish.

    A server at a URL gets its engine's cache switches (the profile's `engine`, else the one detected).
    """
    step = on_step or (lambda message: None)
    for profile in config.servers:
        for variant in config.active_variants():
            label = f"{profile.name}/{variant.name}"
            log = out_dir / f"server-{profile.name}-{variant.name}.log"
            server = ManagedServer(profile, variant, CacheMode.on, log, api_key=api_key)
            try:
                step(f"{label}: starting server")
                server.start()
                result, name = probe_managed(
                    server, task, config, out_dir, api_key=api_key, policy=policy, on_step=lambda msg, label=label: step(f"{label}: {msg}")
                )
                outcome = ServerProbe(label, result, name)
            except (ServerError, ProbeError) as exc:
                died = server.exit_code()
                outcome = ServerProbe(label, error=f"{exc}" + (f" (server exited with code {died})" if died is not None else ""))
            finally:
                server.stop()
            yield outcome


def sweep_probe(
    server: ManagedServer, task: LmEvalTask, config: SweepConfig, run_dir: Path, *, api_key: str | None, warn: Callable[[str], None]
) -> dict:
    """The sweep's hook (`probe: true`): probe a cache-on server before its cells; the manifest entry it returns."""
    try:
        result, name = probe_managed(server, task, config, run_dir, api_key=api_key)
    except ProbeError as exc:
        warn(f"probe of {server.base_url} could not run: {exc}")
        return {"verdict": "inconclusive", "error": str(exc)}
    if result.verdict != "pass":
        warn(f"probe {result.verdict} on {server.profile.name}/{server.variant.name}: bins {', '.join(result.failed_bins) or '-'}")
    return {"file": name, **result.summary()}
