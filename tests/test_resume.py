"""Resume refuses to mix records of different meaning; operational settings may change."""

from __future__ import annotations

import shutil

import pytest

from evalctl.cell import CellKey
from evalctl.config import load_config, with_external_url
from evalctl.errors import ConfigError, ExitCode
from evalctl.manifest import Manifest, PlannedCell, write_manifest
from evalctl.resume import RequestKey, check_same_plan, check_same_prompts, data_fingerprint, differing_fields, resume_config
from evalctl.schema import CacheMode
from evalctl.secrets import redact_config


def make_run(tmp_path, data_dir, url: str | None = None, **overrides):
    config = load_config(
        model="smollm2-135m", overrides={"task": "gsm8k", "data_dir": data_dir, "output_dir": tmp_path, "limit": 2, **overrides}
    )
    if url:
        config = with_external_url(config, url)
    run = tmp_path / "20260101-000000-smollm2-135m-abcdef"
    run.mkdir()
    manifest = Manifest(run_id=run.name, config=redact_config(config.model_dump(mode="json")), data_fingerprint=data_fingerprint(data_dir))
    write_manifest(run, manifest)
    return run, config


def test_meaning_fields_are_named_operational_ones_ignored(tmp_path, data_dir):
    _, config = make_run(tmp_path, data_dir)
    base = config.model_dump(mode="json")
    changed = {**base, "shots": [3], "concurrency": 1, "max_retries": 9, "generation": {**base["generation"], "max_tokens": 7}}
    assert differing_fields(base, changed) == ["concurrency", "generation.max_tokens", "shots"]  # levels are cells
    server = base["servers"][0]
    servers = [{**server, "startup_timeout_s": 5.0, "engine": {**server["engine"], "context_length": 1024, "threads": 1}}]
    assert differing_fields(base, {**base, "servers": servers}) == ["servers.0.engine.context_length"]


def test_resume_from_manifest_applies_operational_overrides(tmp_path, data_dir):
    run, _ = make_run(tmp_path, data_dir)
    config, point = resume_config(run, None, {"max_retries": 1, "max_restarts": 0})
    assert (config.max_retries, config.max_restarts, config.limit) == (1, 0, 2)
    assert point.path == run and point.run_id == run.name


def test_a_run_against_a_url_resumes_from_its_manifest_alone(tmp_path, data_dir):
    run, _ = make_run(tmp_path, data_dir, url="http://127.0.0.1:9/")
    config, _ = resume_config(run, None, {})
    assert [(s.name, s.url) for s in config.servers] == [("external", "http://127.0.0.1:9")]


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"shots": [3]}, "shots"),
        ({"limit": 5, "fewshot": "sampled"}, "fewshot, limit"),
        ({"generation.max_tokens": 3}, "generation.max_tokens"),
    ],
)
def test_resume_refuses_changed_meaning(tmp_path, data_dir, overrides, fields):
    run, _ = make_run(tmp_path, data_dir)
    with pytest.raises(ConfigError, match=f"differs from the recorded one in {fields};"):
        resume_config(run, None, overrides)


def test_resume_refuses_changed_data(tmp_path, data_dir):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    run, _ = make_run(tmp_path, copy)
    with open(copy / "test.jsonl", "a") as fh:
        fh.write('{"question": "1+1?", "answer": "#### 2"}\n')
    with pytest.raises(ConfigError, match="dataset files differ"):
        resume_config(run, None, {})


def test_redacted_secrets_need_the_config_again(tmp_path, data_dir):
    cfg = load_config(model="smollm2-135m", overrides={"task": "gsm8k", "data_dir": data_dir})
    servers = [cfg.servers[0].model_copy(update={"env": {"HF_TOKEN": "secret"}})]
    run, _ = make_run(tmp_path, data_dir)
    from evalctl.manifest import read_manifest

    manifest = read_manifest(run)
    manifest.config = redact_config(cfg.model_copy(update={"servers": servers, "limit": 2}).model_dump(mode="json"))
    write_manifest(run, manifest)
    with pytest.raises(ConfigError, match=r"secrets were redacted there \(servers.0.env.HF_TOKEN\)"):
        resume_config(run, None, {})
    given = cfg.model_copy(update={"servers": servers, "limit": 2})
    assert resume_config(run, given, {})[0].servers[0].env == {"HF_TOKEN": "secret"}


def test_not_a_run_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no manifest.json: not a run folder"):
        resume_config(tmp_path, None, {})


def test_recorded_prompts_must_be_todays():
    cell = CellKey("cpu", "default", CacheMode.on, 1, 4, 1)
    planned = {RequestKey(cell, 0, "aaa")}
    check_same_prompts(set(), planned)
    with pytest.raises(ConfigError, match=r"1 recorded request.*cpu/default cache=on shots=1 conc=4 pass=1 doc 0 prompt bbb"):
        check_same_prompts({RequestKey(cell, 0, "bbb")}, planned)


def test_a_planned_cell_must_ask_what_the_manifest_recorded():
    """Caught even for a cell with no records yet, which the records alone cannot show."""
    cell = CellKey("cpu", "default", CacheMode.on, 1, 4, 1)
    then = PlannedCell(**cell.as_dict(), questions=3, prompts="aaa")
    check_same_plan([], [then])  # a run from before the manifest recorded its plan
    check_same_plan([then], [then])
    with pytest.raises(ConfigError, match=r"1 cell\(s\) would ask other questions .*cpu/default cache=on shots=1 conc=4 pass=1"):
        check_same_plan([then], [then.model_copy(update={"prompts": "bbb"})])


def test_cli_resume_with_other_shots_is_bad_input_naming_the_field(tmp_path, data_dir):
    from conftest import evalctl

    run, _ = make_run(tmp_path, data_dir)
    out = evalctl("sweep", "--resume", str(run), "--shots", "5")
    assert out.returncode == ExitCode.BAD_INPUT
    assert "differs from the recorded one in shots" in " ".join(out.stderr.split())
