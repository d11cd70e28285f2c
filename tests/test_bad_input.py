"""Bad input: a specific message naming the cause, a non-zero exit, nothing written, no server started."""

from __future__ import annotations

import pytest
from conftest import cli

from evalctl.config import load_config
from evalctl.errors import ConfigError, ExitCode


def test_wrong_type_is_named(tmp_path):
    with pytest.raises(ConfigError, match="limit: Input should be a valid integer"):
        load_config(model="smollm2-135m", overrides={"limit": "ten"})


def test_unknown_task_is_named_with_the_known_ones_before_anything_is_written(tmp_path, no_orphans):
    out = cli("sweep", "--model", "smollm2-135m", "--task", "no-such-task", "--output", str(tmp_path / "out"))
    assert out.returncode == ExitCode.BAD_INPUT
    told = " ".join((out.stdout + out.stderr).split())
    assert "unknown task 'no-such-task'" in told and "known: gsm8k, prefix-recall" in told, told
    assert not (tmp_path / "out").exists()


def test_negative_max_restarts_is_rejected():
    with pytest.raises(ConfigError, match="max_restarts"):
        load_config(model="smollm2-135m", overrides={"max_restarts": -1})


def test_missing_data_dir_is_bad_input_before_anything_is_written(tmp_path, no_orphans):
    out = cli(
        "sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--data-dir", str(tmp_path / "nope"), "--output", str(tmp_path / "out")
    )
    assert out.returncode == ExitCode.BAD_INPUT
    assert f"data dir {tmp_path / 'nope'} does not exist" in " ".join(out.stderr.split())
    assert not (tmp_path / "out").exists()


def test_results_dir_not_writable_fails_before_any_server_starts(tmp_path, data_dir, no_orphans):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")
    out = cli("sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--data-dir", str(data_dir), "--output", str(blocker / "sub"))
    assert out.returncode == ExitCode.INTERNAL, out.stderr  # an I/O error
    assert "cannot create run folder" in out.stderr and "Not a directory" in out.stderr
    assert "starting server" not in out.stdout
    assert not list(tmp_path.rglob("*.log"))
