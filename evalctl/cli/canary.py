"""`evalctl canary`: a fault-injecting proxy on 127.0.0.1, a test aid for sweeps and probes."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from evalctl.canary.faults import FAULTS
from evalctl.cli.common import console, err, fail


def canary(
    upstream: Annotated[str, typer.Option(help="Base URL of the real OpenAI-compatible server, e.g. http://127.0.0.1:8080.")],
    fault: Annotated[str, typer.Option(help=f"Fault to inject: {', '.join(FAULTS)}.")],
    port: Annotated[int, typer.Option(help="Port to listen on, on 127.0.0.1 only (0: a free one, printed).")] = 9000,
    chars: Annotated[
        int | None,
        typer.Option(help="corrupt-cached-suffix: characters of the cached prefix garbled (200); truncate-prompt: characters kept (2000)."),
    ] = None,
    verbose: Annotated[bool, typer.Option(help="Log every request.")] = False,
) -> None:
    """Serve a proxy that injects a named fault into /v1/completions in front of a real server.

    A test aid, bound to 127.0.0.1: show that `evalctl probe` or `evalctl sweep --url` catches a
    class of serving bug. lost-prefix: a prompt sharing a prefix with an earlier cached one is
    computed from the rest only (the cached prefix is forgotten); corrupt-cached-suffix: the end of
    that prefix arrives garbled; truncate-prompt: long prompts are cut from the left; fail-on-hit:
    a request that would hit the cache gets HTTP 500 on its first attempt, its retry passes. Usage
    in responses stays realistic. Runs until Ctrl-C or SIGTERM.
    """
    from evalctl.canary.proxy import Canary, CanaryServer, check_upstream

    if fault not in FAULTS:
        raise fail(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    if chars is not None and chars < 1:
        raise fail(f"--chars must be >= 1, got {chars}")
    check_upstream(upstream)
    try:
        server = CanaryServer(Canary(upstream, fault, chars), port, verbose=verbose)
    except OSError as exc:
        raise fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # raises KeyboardInterrupt: stops as Ctrl-C does
    console.print(f"canary: {server.url} -> {upstream} fault={fault}", highlight=False, soft_wrap=True)
    console.file.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        c = server.canary
        err.print(f"canary: {c.requests} completion requests, {c.rewritten} rewritten by {fault}")
