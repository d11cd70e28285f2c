"""Child process that runs the llama.cpp HTTP server in-process (xllamacpp), in its own process group.

Run by its file path, importing only the standard library and xllamacpp, so any venv holding an
xllamacpp release from 0.2.13 on serves; docs/engines.md ("llama.cpp across releases") says how.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

# Fields renamed across xllamacpp releases: newer name -> older name (both directions are tried).
RENAMED = {
    "hostnames": "hostname",  # list of addresses; the older field takes one
    "ui": "webui",
    "ui_config_json": "webui_config_json",
    "ui_mcp_proxy": "webui_mcp_proxy",
}
# The settings a build must have to serve at all: without them no build is usable.
REQUIRED = ("model.path", "port", "hostnames")
STOP_GRACE_S = 2.0  # for the server's own shutdown after SIGTERM, before the process ends regardless


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python llamacpp_main.py")
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx-per-slot", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", choices=["on", "off"], default="on")
    parser.add_argument(
        "--cache-ram-mib", type=int, help="the cache-on server's host-RAM prompt cache; default: the build's (a cache-off one: 0)"
    )
    parser.add_argument("--slot-save-path", required=True, help="enables the slot erase action used to flush")
    parser.add_argument("--speculative", help="speculative decoding: a COMMON_SPECULATIVE_TYPE_ name without the prefix (ngram_simple)")
    parser.add_argument("--draft-model", help="the draft model's GGUF (--speculative draft_simple)")
    parser.add_argument("--record", help="write the launch record (build, settings not set) to this JSON file")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an xllamacpp.CommonParams field (dotted: cpuparams.n_threads)",
    )
    return parser.parse_args(argv)


def _coerce(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _owner(params: object, dotted: str) -> tuple[object, str] | None:
    """The object holding the last part of `dotted` and that part's name, under the name this build uses; None if it has neither."""
    *parents, leaf = dotted.split(".")
    target = params
    for part in parents:
        if not hasattr(target, part):
            return None
        target = getattr(target, part)
    older = {**RENAMED, **{old: new for new, old in RENAMED.items()}}
    for name in (leaf, older.get(leaf)):
        if name is not None and hasattr(target, name):
            return target, name
    return None


def _fit(value: object, current: object) -> object:
    """`value` in the shape of the field it replaces: one address for the older single `hostname`, a list for `hostnames`."""
    if isinstance(current, list) and not isinstance(value, list):
        return [value]
    if isinstance(current, str) and isinstance(value, list):
        if len(value) != 1:
            raise ValueError(f"this build binds one address, got {value}")
        return value[0]
    return value


def apply(params: object, settings: dict[str, object]) -> tuple[dict[str, str], dict[str, str]]:
    """Write each `settings` item (dotted field names, newest names) to the field of this build that holds it; returns
    (renamed: name -> the older or newer field it went to, unset: name -> why not). A value of the wrong type raises."""
    renamed: dict[str, str] = {}
    unset: dict[str, str] = {}
    for name, value in settings.items():
        found = _owner(params, name)
        if found is None:
            unset[name] = "no such field in this build"
            continue
        target, field = found
        setattr(target, field, _fit(value, getattr(target, field)))
        if field != name.rpartition(".")[2]:
            renamed[name] = field
    return renamed, unset


def llama_cpp_build(version: str, build_info: dict) -> int | None:
    """The llama.cpp build (bNNNN) a release vendors: its own build info when it has one, else the
    third part of a YYYY.M.BUILD version (builds since 2026 report 0 in BUILD_INFO)."""
    number = int(build_info.get("build_number") or 0)
    if number > 0:
        return number
    parts = version.split(".")
    return int(parts[2]) if len(parts) >= 3 and len(parts[0]) == 4 and parts[2].isdigit() else None


def _speculation(xllamacpp: object, args: argparse.Namespace, version: str) -> dict[str, object]:
    """The settings of the speculative decoding asked for (none if not); exits when this build has no such type."""
    if not args.speculative:
        return {}
    kinds = getattr(xllamacpp, "common_speculative_type", None)
    kind = getattr(kinds, f"COMMON_SPECULATIVE_TYPE_{args.speculative.upper()}", None)
    if kind is None:
        sys.exit(f"llamacpp_main: xllamacpp {version} has no speculative decoding of type {args.speculative}")
    return {"speculative.types": [kind], **({"speculative.draft.mparams.path": args.draft_model} if args.draft_model else {})}


def main(argv: list[str] | None = None) -> None:
    args = _parse(sys.argv[1:] if argv is None else argv)
    import xllamacpp

    settings: dict[str, object] = {
        "model.path": args.model,
        "n_parallel": args.parallel,
        "n_ctx": args.ctx_per_slot * args.parallel,  # total, shared by the slots
        "port": args.port,
        "hostnames": [args.host],
        "cpuparams.n_threads": args.threads,
        "cpuparams_batch.n_threads": args.threads,
        "endpoint_metrics": True,
        "endpoint_slots": True,
        "slot_save_path": args.slot_save_path,
        "cache_prompt": args.cache == "on",
    }
    # The host-RAM prompt cache refills erased slots: off on a cold server, as asked on a warm one (absent: the build's).
    if args.cache == "off" or args.cache_ram_mib is not None:
        settings["cache_ram_mib"] = 0 if args.cache == "off" else args.cache_ram_mib
    for item in args.param:
        name, _, value = item.partition("=")
        settings[name] = _coerce(value)
    version = getattr(xllamacpp, "__version__", "unknown")
    asked = _speculation(xllamacpp, args, version)
    settings.update(asked)

    params = xllamacpp.CommonParams()
    renamed, unset = apply(params, settings)
    # A feature asked for and not set would make its arm the reference arm under another name: refuse instead.
    missing = [name for name in (*REQUIRED, *asked) if name in unset]
    if missing:
        sys.exit(f"llamacpp_main: xllamacpp {version} has no field for {missing}: it cannot serve")
    if args.record:  # written whole or not at all: evalctl reads it once the server answers
        build = llama_cpp_build(version, dict(getattr(xllamacpp, "BUILD_INFO", {}) or {}))
        record = {"engine": "xllamacpp", "version": version, "llama_cpp_build": build, "python": sys.executable}
        with open(f"{args.record}.tmp", "w") as out:
            json.dump({**record, "renamed": renamed, "unset": unset}, out, indent=1)
        os.replace(f"{args.record}.tmp", args.record)
    for name, why in unset.items():
        print(f"llamacpp_main: not set: {name} ({why}; xllamacpp {version})", flush=True)

    serve_until_stopped(params, f"serving {args.model} on {args.host}:{args.port} cache={args.cache} (xllamacpp {version})")


def serve_until_stopped(params, what: str) -> None:
    """Serve until SIGTERM or SIGINT, then end within STOP_GRACE_S."""
    import xllamacpp

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # kept alive until the stop
    print(f"llamacpp_main: {what}", flush=True)
    stop.wait()
    # The server's destructor waits for its main loop, which a stop just after start-up can leave
    # hanging ("~Server: waiting for main loop exit") until evalctl's SIGKILL, 10 s later. It has
    # nothing to save, so it gets a moment to end cleanly, then the process ends anyway.
    timer = threading.Timer(STOP_GRACE_S, os._exit, (0,))
    timer.daemon = True
    timer.start()
    del server


if __name__ == "__main__":
    main()
