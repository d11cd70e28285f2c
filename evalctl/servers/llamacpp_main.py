"""Child process that runs the llama.cpp HTTP server in-process (xllamacpp).

Launched by evalctl as its own process group, so stopping it stops everything.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evalctl.servers.llamacpp_main")
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx-per-slot", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", choices=["on", "off"], default="on")
    parser.add_argument("--slot-save-path", required=True, help="enables the slot erase action used to flush")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="set any xllamacpp.CommonParams field")
    return parser.parse_args(argv)


def _coerce(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def main(argv: list[str] | None = None) -> None:
    args = _parse(sys.argv[1:] if argv is None else argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel  # total, shared by the slots
    params.port = args.port
    params.hostnames = [args.host]
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    params.endpoint_slots = True
    params.slot_save_path = args.slot_save_path
    # The host-RAM prompt cache would refill erased slots; flushes must mean cold.
    params.cache_ram_mib = 0
    params.cache_prompt = args.cache == "on"
    for item in args.param:
        name, _, value = item.partition("=")
        setattr(params, name, _coerce(value))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # noqa: F841 - keeps the HTTP server alive
    print(f"llamacpp_main: serving {args.model} on {args.host}:{args.port} cache={args.cache}", flush=True)
    stop.wait()


if __name__ == "__main__":
    main()
