#!/usr/bin/env bash
# A CPU-only venv with SGLang's real argument parser, so tests can check every
# generated SGLang command line against it (tests/servers/test_engine_parsers.py).
# SGLang itself needs a GPU to serve; its parser needs only these imports.
# Usage: scripts/install-sglang-parser.sh [VENV_DIR]   (default .venv-sglang)
# Then:  export EVALCTL_SGLANG_PYTHON=VENV_DIR/bin/python
set -euo pipefail
venv="${1:-.venv-sglang}"
sglang_version="${SGLANG_VERSION:-0.5.23}"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.server_args" 2>/dev/null; then
    echo "sglang parser venv ready: $venv"
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# CPU torch first: letting sglang's pins pull torch would fetch a CUDA build of several GB.
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q --no-deps "sglang==$sglang_version"
"$venv/bin/pip" install -q numpy msgspec psutil orjson pybase64 requests triton packaging pillow \
    starlette pydantic pyzmq tqdm IPython aiohttp
"$venv/bin/python" -c "import sglang.srt.server_args" && echo "sglang parser venv ready: $venv"
