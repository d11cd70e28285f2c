"""GSM8K ships inside the package: pinned by sha256, licensed, carried by a non-editable install, the default data."""

from __future__ import annotations

import hashlib
import re

from evalctl.config import load_config
from evalctl.datasets import packaged_data_dir
from evalctl.resume import data_fingerprint
from evalctl.tasks.registry import resolved_data_dir


def test_packaged_files_match_the_sha256_their_source_note_pins():
    folder = packaged_data_dir("gsm8k")
    pinned = dict((name, digest) for digest, name in re.findall(r"^\s+([0-9a-f]{64})\s+(\S+)$", (folder / "SOURCE.md").read_text(), re.M))
    assert set(pinned) == {"train.jsonl", "test.jsonl"}
    for name, digest in pinned.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "3101c7d5072418e28b9008a6636bde82a006892c" in (folder / "SOURCE.md").read_text()  # the upstream commit


def test_the_packaged_copy_is_the_default_and_the_hub_one_option_away(monkeypatch):
    monkeypatch.delenv("EVALCTL_DATA_DIR", raising=False)
    config = load_config(model="smollm2-135m", overrides={"task": "gsm8k"})
    assert resolved_data_dir(config.task, config.data_dir) == packaged_data_dir("gsm8k")
    assert data_fingerprint(resolved_data_dir(config.task, config.data_dir)) is not None  # what the manifest records
    hub = load_config(model="smollm2-135m", overrides={"task": "gsm8k", "data_dir": "hub"})
    assert resolved_data_dir(hub.task, hub.data_dir) is None
    monkeypatch.setenv("EVALCTL_DATA_DIR", "hub")
    assert resolved_data_dir(config.task, config.data_dir) is None
