#!/usr/bin/env bash
# A CPU-only venv with SGLang's real argument parser, so tests can check every
# generated SGLang command line against it (tests/servers/test_engine_parsers.py).
# SGLang itself needs a GPU to serve; its parser needs only these imports.
# Usage: scripts/install-sglang-parser.sh [VENV_DIR]
#   no VENV_DIR: the venv cached by version outside the clone (scripts/lib/venv-cache.sh),
#   built once per SGLang version and version of this script, then reused.
# Prints the venv's folder on stdout (its last line); progress goes to stderr.
# Then:  export EVALCTL_SGLANG_PYTHON=<that folder>/bin/python
set -euo pipefail
. "$(dirname "$0")/lib/venv-cache.sh"
sglang_version="${SGLANG_VERSION:-0.5.23}"

check() { "$venv/bin/python" -c "import sglang.srt.server_args"; }
venv_cache_open sglang-parser "$sglang_version" "$0" "${1:-}" || exit 0
{
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    # CPU torch first: letting sglang's pins pull torch would fetch a CUDA build of several GB.
    "$venv/bin/pip" install -q torch==2.13.0
    "$venv/bin/pip" install -q --no-deps "sglang==$sglang_version"
    "$venv/bin/pip" install -q numpy msgspec psutil orjson pybase64 requests triton packaging pillow \
        starlette pydantic pyzmq tqdm IPython aiohttp
} >&2
venv_cache_close
