"""Finishing an interrupted run: same config meaning, same data, only missing requests sent.

A request is done when the records hold a final row for its key (`records.RECORD_KEYS`):
an answer, a 4xx refusal or a malformed response. Rows whose error says the server gave no
answer (`client.RETRYABLE_ERROR_KINDS`) are sent again; compaction keeps one row per key.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evalctl.cell import CellKey
from evalctl.config import config_from_dict, with_external_url
from evalctl.errors import BadInput, ConfigError
from evalctl.fsio import file_sha256
from evalctl.manifest import PlannedCell
from evalctl.records import RECORD_KEYS, is_final, read_records
from evalctl.runs import Run, open_run
from evalctl.schema import SweepConfig
from evalctl.secrets import REDACTED, redact_config
from evalctl.tasks.lmeval import Prompt
from evalctl.tasks.registry import SPLIT_FILES, resolved_data_dir

if TYPE_CHECKING:
    from evalctl.plan import Plan

# Settings that change how a run is carried out, not what its records mean.
OPERATIONAL_FIELDS = {"request_timeout_s", "max_retries", "max_restarts", "output_dir", "data_dir", "slurm", "gate_policy", "slo"}
OPERATIONAL_PROFILE_FIELDS = {"startup_timeout_s", "port", "url", "engine.threads"}


class RequestKey(NamedTuple):
    """One request of a run: its cell and its question (the columns `records.RECORD_KEYS`)."""

    cell: CellKey
    doc_id: int
    prompt_hash: str

    @property
    def part(self) -> tuple[str, str]:
        """The profile x variant it belongs to (one cluster job's share)."""
        return self.cell.profile, self.cell.variant


def request_key(cell: CellKey, prompt: Prompt) -> RequestKey:
    return RequestKey(cell, prompt.doc_id, prompt.prompt_hash)


def data_fingerprint(data_dir: Path | None) -> str | None:
    """sha256 of the local dataset files; None for hub data (prompt hashes still guard it)."""
    if data_dir is None:
        return None
    digest = hashlib.sha256()
    for name in sorted(SPLIT_FILES.values()):
        digest.update(name.encode())
        file_sha256(data_dir / name, digest)
    return digest.hexdigest()


def _meaning(config: dict[str, Any]) -> dict[str, Any]:
    """The fields of a config dump that carry its records' meaning, flat (`_flatten`)."""
    kept = _flatten({k: v for k, v in redact_config(config).items() if k not in OPERATIONAL_FIELDS})
    return {k: v for k, v in kept.items() if not (k.startswith("servers.") and k.split(".", 2)[2] in OPERATIONAL_PROFILE_FIELDS)}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return {prefix: value}
    return {name: v for key, item in items for name, v in _flatten(item, f"{prefix}.{key}" if prefix else str(key)).items()}


def differing_fields(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Dotted names of the fields whose meaning differs between two config dumps."""
    a, b = _meaning(recorded), _meaning(wanted)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def resume_config(run_dir: Path, given: SweepConfig | None, overrides: dict[str, Any], url: str | None = None) -> tuple[SweepConfig, Run]:
    """The config to finish `run_dir` with (`given` on the command line, else the manifest's with `overrides`; `url`: at
    an external server), and the run as it stopped; ConfigError when its meaning differs from the recorded one."""
    try:
        run = open_run(run_dir)
    except BadInput as exc:
        raise ConfigError(f"cannot resume {run_dir}: {exc}") from None
    manifest = run.manifest
    recorded = manifest.config
    if not recorded:
        raise ConfigError(f"cannot resume {run_dir}: its manifest has no config")
    if given is None:
        hidden = sorted(k for k, v in _flatten(recorded).items() if REDACTED in str(v))
        if hidden:
            raise ConfigError(
                f"cannot resume {run_dir} from its manifest alone: secrets were redacted there ({', '.join(hidden)});"
                " pass the same --config/--model again with --resume"
            )
        given = config_from_dict(recorded, overrides, f"{run_dir}/manifest.json")
    if url:  # the engine recorded behind the first URL is taken to serve the new one
        given = with_external_url(given, url, (recorded["servers"][0].get("engine") or {}).get("name"))
    # As this version reads it (its defaults filled in), so a run recorded by an older one compares field by field.
    recorded = config_from_dict(recorded, None, f"{run_dir}/manifest.json").model_dump(mode="json")
    changed = differing_fields(recorded, given.model_dump(mode="json"))
    if changed:
        raise ConfigError(
            f"cannot resume {run_dir}: the config differs from the recorded one in {', '.join(changed)};"
            " records would mix incompatible settings (start a new run instead)"
        )
    if manifest.data_fingerprint != data_fingerprint(resolved_data_dir(given.task, given.data_dir)):
        raise ConfigError(f"cannot resume {run_dir}: the dataset files differ from the ones the run started with")
    return given, run


def finished_keys(run: Run) -> set[RequestKey]:
    """Keys of the requests the records settle (see module doc); empty for a run with no records yet."""
    df = read_records(run.path)
    rows = df.loc[is_final(df), RECORD_KEYS].to_dict("records")
    return {RequestKey(CellKey.from_row(row), int(row["doc_id"]), str(row["prompt_hash"])) for row in rows}


def planned_keys(plan: Plan) -> set[RequestKey]:
    """Keys of every request the plan's cells send."""
    return {request_key(key, prompt) for key, cell in plan.cells.items() for prompt in cell.prompts}


def check_same_plan(recorded: list[PlannedCell], planned: list[PlannedCell]) -> None:
    """Refuse when a cell the manifest recorded asks other questions today (a run from before it recorded none passes)."""
    then = {cell.cell: cell for cell in recorded}
    changed = [cell.cell.label for cell in planned if cell.cell in then and then[cell.cell] != cell]
    if changed:
        raise ConfigError(
            f"cannot resume: {len(changed)} cell(s) would ask other questions than the run planned (e.g. {changed[0]});"
            " the dataset, few-shot exemplars or lm-eval changed: start a new run"
        )


def check_same_prompts(finished: set[RequestKey], planned: set[RequestKey]) -> None:
    """Refuse when a recorded request is not one today's plan would send (its prompt changed)."""
    stray = finished - planned
    if stray:
        example = sorted(stray)[0]
        raise ConfigError(
            f"cannot resume: {len(stray)} recorded request(s) match no prompt of today's plan"
            f" (e.g. {example.cell.label} doc {example.doc_id} prompt {example.prompt_hash});"
            " the dataset, few-shot exemplars or lm-eval changed: start a new run"
        )
