#!/usr/bin/env bash
# A venv that serves SGLang on CPU (SGLANG_USE_CPU_ENGINE=1, --device cpu, torch_native attention)
# and also holds SGLang's argument parser (tests/servers/test_engine_parsers.py), plus what
# converts the bundled GGUF to a safetensors folder (gguf, accelerate): one venv, one install.
# The venv is a variant's `python` (profile field `python`), never evalctl's own environment.
#
# Usage: scripts/install-sglang-cpu.sh [VENV_DIR]   (with `uv` on PATH, or $UV, uv installs it)
#   no VENV_DIR: the venv cached by version outside the clone (scripts/lib/venv-cache.sh),
#   built once per SGLang version, torch version and version of this script, then reused.
# Prints the venv's folder on stdout (its only line); progress goes to stderr.
# Then:  export EVALCTL_SGLANG_PYTHON="$(scripts/install-sglang-cpu.sh)/bin/python"
#
# What is left out, and why: SGLang's Requires-Dist names CUDA-only packages (kernels, CUDA
# bindings, flash-attention, ...) that a CPU serve never imports; they are dropped by name below.
# torchvision: SGLang imports `torchvision.transforms` at start-up (its model configs import the
# vision processors), so it must be there; but PyPI's torchvision is a CUDA build, whose C ops
# cannot load against CPU torch, and its import then fails with `operator torchvision::nms does
# not exist` (its Python side registers a fake kernel for two ops it assumes its C side defined).
# No reachable index has a CPU build. So the wheel matching CPU torch goes in without its CUDA
# dependencies, plus a shim (evalctl_torchvision_cpu.py, loaded by a .pth file) that, only when
# torchvision is first imported, defines those two ops' schemas, as its C side would have. No
# C op of torchvision runs for a text model; image inputs (decode_jpeg) would fail, loudly.
# Removing torchvision instead (the vLLM venv's fix) breaks SGLang's import; patching SGLang's
# files would be lost on any reinstall. timm (vision encoders) stays out: nothing imports it
# for a text model.
set -euo pipefail
. "$(dirname "$0")/lib/venv-cache.sh"
# 0.5.23 (the version of the old parser venv) cannot serve here: on CPU its KV pool imports
# `sgl_kernel` (copy_all_layer_kv_cache_cpu), whose CPU build no reachable index has. 0.5.14 serves.
sglang_version="${SGLANG_VERSION:-0.5.14}"
torch_version="${SGLANG_TORCH_VERSION:-2.13.0}"
torchvision_version="${SGLANG_TORCHVISION_VERSION:-0.28.0}"  # the release built with torch 2.13

check() {
    # The server module pulls in the scheduler and model runner; the model loader, the CPU
    # platform and the parser follow. A missing dependency or a CUDA-linked import fails here.
    "$venv/bin/python" - <<'PY'
import importlib.metadata as md
import gguf, accelerate, transformers, psutil  # noqa: F401  (conversion + teardown checks)
import sglang.srt.server_args  # noqa: F401  (the parser check)
import sglang.launch_server  # noqa: F401
import sglang.srt.managers.scheduler  # noqa: F401
import sglang.srt.model_executor.model_runner  # noqa: F401
print("sglang", md.version("sglang"), "torch", md.version("torch"))
PY
}

venv_cache_open sglang-cpu "$sglang_version-torch$torch_version" "$0" "${1:-}" || exit 0
exec 3>&1 1>&2  # the build's output is progress: stdout holds only the folder (venv_cache_close)
# CUDA-only requirements (names normalised: `_` to `-`), and the vision stack.
unwanted='^(cuda-python|flash-attn.*|flashinfer.*|nvidia-.*|nvshmem.*|quack-kernels|sgl-deep-.*|sgl-flash-mla|sglang-kernel|humming-kernels|tilelang|tokenspeed.*|torch-memory-saver|torchaudio|torchcodec|torchvision|timm|kernels|py-spy|apache-tvm-ffi|deepseek-recipe|torch)$'

uv="${UV:-uv}"
if command -v "$uv" >/dev/null 2>&1; then
    # uv reads no pip config, so pip's find-links (the local CPU torch wheel) and constraints are
    # passed on. --compile-bytecode, as pip does: without .pyc files every start-up compiles its
    # imports. --seed puts pip in the venv.
    links="${PIP_FIND_LINKS:-$(python3 -m pip config get global.find-links 2>/dev/null || true)}"
    constraint="${PIP_CONSTRAINT:-$(python3 -m pip config get global.constraint 2>/dev/null || true)}"
    "$uv" venv -q --seed --allow-existing "$venv" --python python3
    install=("$uv" pip install -q --compile-bytecode --python "$venv/bin/python" ${links:+--find-links "$links"} ${constraint:+--constraint "$constraint"})
else
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    install=("$venv/bin/pip" install -q)
fi
# CPU torch first and alone: letting SGLang's pin pull torch would fetch a CUDA build of several GB.
"${install[@]}" "torch==$torch_version" packaging
"${install[@]}" --no-deps "sglang==$sglang_version"
# SGLang's own requirements for this platform, minus the unwanted ones, with CPU torch held.
mapfile -t requirements < <("$venv/bin/python" - "$unwanted" <<'PY'
import re, sys
from importlib.metadata import requires
from packaging.requirements import Requirement

unwanted = re.compile(sys.argv[1])
for line in requires("sglang") or []:
    req = Requirement(line)
    name = re.sub(r"[-_.]+", "-", req.name).lower()
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if not unwanted.match(name):
        print(line.split(";")[0].strip())
PY
)
"${install[@]}" "torch==$torch_version" "${requirements[@]}" triton accelerate
"${install[@]}" --no-deps "torchvision==$torchvision_version"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat >"$site/evalctl_torchvision_cpu.py" <<'PY'
"""Written by evalctl's scripts/install-sglang-cpu.sh: lets PyPI's torchvision (a CUDA build whose
C ops cannot load against CPU torch) import, by defining the two op schemas its Python side
expects, right before torchvision is first imported. Nothing else is touched."""

import importlib.abc
import sys

_libraries = []  # a torch.library.Library drops its definitions when collected


class _DefineOpsFirst(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            library = torch.library.Library("torchvision", "DEF")
            for op in ("nms", "qnms"):
                library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _libraries.append(library)
        return None  # the import itself goes on as usual


sys.meta_path.insert(0, _DefineOpsFirst())
PY
echo "import evalctl_torchvision_cpu" >"$site/evalctl_torchvision_cpu.pth"
exec 1>&3
venv_cache_close
