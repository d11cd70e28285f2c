"""Keep credentials out of the run folder: redact key-like names in what the manifest records."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
# Names that hold credentials: OPENAI_API_KEY, HF_TOKEN, --api-key, db_password, client_secret ...
_SECRET_NAME = re.compile(r"key|token|secret|passw(or)?d|credential", re.IGNORECASE)
# An environment assignment in a command line: `env HF_TOKEN=x ...`, `docker run -e HF_TOKEN=x ...`.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {name: REDACTED if is_secret_name(name) else value for name, value in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """Hide the values of secret-looking options and assignments: `--api-key X`, `--api-key=X`, `HF_TOKEN=X`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
        elif (arg.startswith("-") or _ASSIGNMENT.match(arg)) and "=" in arg and is_secret_name(arg.split("=", 1)[0]):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(arg)
            hide_next = arg.startswith("-") and is_secret_name(arg)
    return out


def redact_config(dump: dict[str, Any]) -> dict[str, Any]:
    """A `SweepConfig.model_dump()` with secret env values and secret-looking args hidden, in profiles and variants."""

    def redacted(entry: dict[str, Any], *argvs: str) -> dict[str, Any]:
        return {**entry, "env": redact_env(entry.get("env") or {}), **{k: redact_argv(entry.get(k) or []) for k in argvs}}

    servers = [redacted(s, "extra_args") for s in dump.get("servers", [])]
    variants = [redacted(v, "extra_args", "command_prefix") for v in dump.get("variants", [])]
    return {**dump, "servers": servers, "variants": variants}
