"""The typed manifest: fields a later version adds are kept; a manifest it cannot read fails with a clear error."""

from __future__ import annotations

import json

import pytest
from conftest import cli

from evalctl.cell import CellKey
from evalctl.errors import ExitCode
from evalctl.manifest import Manifest, ManifestError, read_manifest, write_manifest
from evalctl.schema import CacheMode

# A manifest of a local run with one failed server, plus a field no version knows.
OLD = {
    "run_id": "20261101-000000-smollm2-135m-abcdef",
    "created_at": "2026-11-01T00:00:00+00:00",
    "status": "failed",
    "evalctl": {"version": "0.1.0", "git_revision": None},
    "host": {"hostname": "h", "cpus": 2},
    "config": {"model": "smollm2-135m", "servers": [{"name": "cpu", "engine": "llamacpp"}]},
    "data_fingerprint": None,
    "servers": [
        {
            "profile": "cpu",
            "variant": "default",
            "cache": "on",
            "engine": "llamacpp",
            "gpu": None,
            "devices": [],
            "variant_git_revision": None,
            "restarts": 1,
            "restart_log": [{"at": "t", "cell": "c", "exit_code": -9}],
            "cells": [{"shots": 1, "concurrency": 4, "pass_index": 1, "flushed": True, "prewarmed": False, "metrics_before": {}}],
            "status": "failed",
            "error": "died",
            "exit_code": -9,
            "log_tail": "boom",
        }
    ],  # fmt: skip
    "failures": [{"server": "cpu/default cache=on", "error": "died", "exit_code": -9, "log_tail": "boom", "failed_cells": ["c"]}],
    "finished_at": "2026-11-01T00:01:00+00:00",
    "from_a_later_version": {"kept": True},
}


def test_a_manifest_loads_and_keeps_fields_a_later_version_wrote(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(OLD))
    manifest = read_manifest(tmp_path)
    assert manifest.executor == "local" and manifest.jobs == [] and manifest.gate is None
    assert manifest.servers[0].restart_log[0].exit_code == -9 and manifest.servers[0].cells[0].flushed
    assert manifest.failures[0].failed_cells == ["c"] and manifest.model == "smollm2-135m"
    write_manifest(tmp_path, manifest)
    again = json.loads((tmp_path / "manifest.json").read_text())
    assert again["from_a_later_version"] == {"kept": True}
    assert {k: again[k] for k in OLD} == {**OLD, "servers": again["servers"]}  # the config as recorded
    assert Manifest.model_validate(again) == manifest


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "is corrupt"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({**OLD, "servers": "cpu"}), "servers: Input should be a valid list"),
        (json.dumps({k: v for k, v in OLD.items() if k != "run_id"}), "run_id: Field required"),
        (json.dumps({**OLD, "status": "exploded"}), "status: Input should be"),
    ],
)
def test_unreadable_manifest_is_a_clear_error(tmp_path, text, message):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ManifestError, match=message):
        read_manifest(tmp_path)


def test_cli_reports_an_unreadable_manifest_as_bad_input(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({**OLD, "servers": "cpu"}))
    (tmp_path / "records.jsonl").write_text("")
    out = cli("gate", str(tmp_path))
    assert out.returncode == ExitCode.BAD_INPUT, out.stderr
    assert "not an evalctl manifest" in " ".join(out.stderr.split()) and "Traceback" not in out.stderr


def test_a_manifests_cells_are_cell_keys_and_their_json_stays_flat(tmp_path):
    decision = {"profile": "cpu", "variant": "default", "cache": "on", "shots": 1, "concurrency": 4, "pass_index": 1}
    old = {**OLD, "decisions": [{**decision, "verdict": "pass", "look": 2, "answered": 20, "planned": 50}]}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    manifest = read_manifest(tmp_path)
    cell = CellKey("cpu", "default", CacheMode.on, 1, 4, 1)
    assert manifest.decisions[0].cell == cell
    assert manifest.servers[0].cell_of(manifest.servers[0].cells[0]) == cell
    write_manifest(tmp_path, manifest)
    again = json.loads((tmp_path / "manifest.json").read_text())["decisions"][0]
    assert {k: again[k] for k in decision} == decision and again["verdict"] == "pass"
