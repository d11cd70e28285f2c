"""What the dashboard knows of a results root: one row per run x configuration (profile x variant).

The dashboard's one seam to the run folders (the history store and each run's gate.json): re-point
`load_catalog` when the run-folder readers change.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import pandas as pd

from evalctl.analysis.checks.base import worst
from evalctl.analysis.gate_document import GATE_FILE, GateDocument, read_gate
from evalctl.history.store import HistoryStore, RunListing, metric_trend

Verdict = Literal["pass", "regression", "inconclusive", "incomplete", "running", "not gated"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
GATE_VERDICTS = ("regression", "inconclusive", "pass")
RUN_ROW_COLUMNS = ["folder", "run_id", "model", "profile", "variant", "created_at", "status", "verdict", "engine_version",
                   "git_revision", "gated", "baseline", "note", "path"]  # fmt: skip


def verdict_of(status: str, gate: GateDocument | None, profile: str | None = None, variant: str | None = None) -> Verdict:
    """A run's verdict for one configuration: its state unless complete, else the worst of the gate's checks that
    concern it (a check naming no profile or variant concerns every one); the gate's own verdict when none does."""
    if status == "running":
        return "running"
    if status != "complete":
        return "incomplete"
    if gate is None:
        return "not gated"
    checks = [c for c in gate.checks if c.profile in (None, profile) and c.variant in (None, variant)]
    found = {c.status for c in checks} & set(GATE_VERDICTS)  # a warning never decides
    return worst(found) if found else gate.verdict  # type: ignore[return-value]


def _configurations(folder: RunListing, recorded: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The (profile, variant) pairs a run recorded samples for, else the ones its config plans."""
    if str(folder.path) in recorded:
        return recorded[str(folder.path)]
    config = folder.manifest.config if folder.manifest else {}
    profiles = [s.get("name") for s in config.get("servers") or [] if isinstance(s, dict)] or ["?"]
    variants = config.get("run_variants") or [v.get("name") for v in config.get("variants") or [] if isinstance(v, dict)] or ["default"]
    return [(str(p), str(v)) for p in profiles for v in variants]


def _engine_version(folder: RunListing, profile: str, variant: str) -> str:
    servers = folder.manifest.servers if folder.manifest else []
    versions = {str(s.engine_version or s.info.get("version") or "") for s in servers if s.profile == profile and s.variant == variant}
    return ", ".join(sorted(v for v in versions if v))


def _git_revision(folder: RunListing, variant: str) -> str:
    """The variant's build revision when the config names one, else evalctl's own."""
    if folder.manifest is None:
        return ""
    for v in folder.manifest.config.get("variants") or []:
        if isinstance(v, dict) and v.get("name") == variant and v.get("git_revision"):
            return str(v["git_revision"])[:12]
    revision = folder.manifest.evalctl.git_revision
    return f"evalctl {revision[:12]}" if revision else ""


@dataclass(frozen=True)
class Catalog:
    roots: list[Path]
    store: HistoryStore  # queries any of the folders, whichever root holds them
    folders: list[RunListing]  # every folder under the root, newest first
    gates: dict[str, GateDocument | None]  # gate.json by folder path; None when not gated
    runs: pd.DataFrame  # RUN_ROW_COLUMNS, one row per run x configuration, newest first
    # HistoryStore.cells over every run, with accuracy_acc (each run's primary `metric`)
    # and its 95% Wilson bounds accuracy_lo, accuracy_hi
    cells: pd.DataFrame
    bisects: dict[str, dict] = field(default_factory=dict)  # finished bisects' culprits by their --from-run folder path

    def by_run_id(self, run_id: str | None) -> RunListing | None:
        return next((f for f in self.folders if f.run_id == run_id), None) if run_id else None

    def model_folders(self, model: str) -> list[RunListing]:
        return [f for f in self.folders if f.model == model]


def load_catalog(roots: list[Path]) -> Catalog:
    """Every run folder under the roots with its configurations and verdicts. BadInput for a missing root."""
    stores = [HistoryStore(root) for root in roots]
    never = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    folders = sorted((f for s in stores for f in s.folders()), key=lambda f: (f.created_at or never, f.run_id), reverse=True)
    store = stores[0]
    cells = store.cells(folders)
    accuracy = metric_trend(cells, "accuracy")  # once here, not per page
    cells = cells.assign(
        accuracy_acc=accuracy["value"].to_numpy(), accuracy_lo=accuracy["lo"].to_numpy(), accuracy_hi=accuracy["hi"].to_numpy()
    )
    recorded: dict[str, list[tuple[str, str]]] = {}
    for path, profile, variant in cells[["path", "profile", "variant"]].drop_duplicates().itertuples(index=False):
        recorded.setdefault(path, []).append((str(profile), str(variant)))
    gates, rows = {}, []
    for folder in folders:
        note, gate = folder.note, None
        try:
            gate = read_gate(folder.path)
        except ValueError as exc:
            note = "; ".join(x for x in (note, f"{GATE_FILE} unreadable: {exc}") if x)
        gates[str(folder.path)] = gate
        for profile, variant in _configurations(folder, recorded):
            rows.append([folder.path.name, folder.run_id, folder.model, profile, variant, folder.created_at, folder.status,
                         verdict_of(folder.status, gate, profile, variant), _engine_version(folder, profile, variant),
                         _git_revision(folder, variant), gate is not None, gate.baseline if gate else None, note,
                         str(folder.path)])  # fmt: skip
    runs = pd.DataFrame(rows, columns=RUN_ROW_COLUMNS)
    runs["created_at"] = pd.to_datetime(runs["created_at"], utc=True)
    return Catalog([Path(r) for r in roots], store, folders, gates, runs, cells, finished_bisects(roots))


def finished_bisects(roots: list[Path]) -> dict[str, dict]:
    """Bisects beside the runs (`<root>/*/bisect.json`, where `evalctl bisect` puts them) that named a culprit, by from-run."""
    from evalctl.bisect.state import StateError, load_state

    found = {}
    for state_file in sorted(p for root in roots for p in Path(root).glob("*/bisect.json")):
        try:
            state = load_state(state_file.parent)
        except StateError:
            continue  # a bisect being written or from another version: shown once readable
        if state.outcome == "culprit" and state.culprit:
            build = state.builds[state.culprit[0]]
            found[str(state.settings.from_run)] = {
                "culprit": build.label,
                "probability": state.probability,
                "folder": state_file.parent.name,
            }
    return found
