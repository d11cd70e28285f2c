"""The dashboard's data and build over hand-made run folders: verdicts, flip ledger, settings diff, incremental builds."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import cli, gate_doc
from run_folders import cell_rows, make_run

from evalctl.dashboard.build import build_site, page_name, settings_table
from evalctl.dashboard.catalog import load_catalog, verdict_of
from evalctl.errors import BadInput, ExitCode
from evalctl.history.store import HistoryStore
from evalctl.manifest import Manifest
from evalctl.runlock import RunLock

DAY = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def gate_json(run, verdict: str, checks: list[dict], baseline: str | None = None) -> None:
    (run / "gate.json").write_text(gate_doc(verdict, checks, run=run.name, baseline=baseline).to_json())


def test_verdict_is_the_state_until_complete_then_the_worst_check_of_the_configuration():
    checks = [
        {"status": "pass", "profile": None, "variant": None},
        {"status": "regression", "profile": "h100", "variant": "patched"},
        {"status": "inconclusive", "profile": "h100", "variant": "baseline"},
    ]
    gate = gate_doc("regression", checks)
    assert verdict_of("running", gate, "h100", "patched") == "running"
    assert verdict_of("interrupted", gate, "h100", "patched") == "incomplete"
    assert verdict_of("partial", None) == "incomplete"
    assert verdict_of("complete", None) == "not gated"
    assert verdict_of("complete", gate, "h100", "patched") == "regression"
    assert verdict_of("complete", gate, "h100", "baseline") == "inconclusive"
    assert verdict_of("complete", gate, "a100", "baseline") == "pass"  # only the run-wide check concerns it
    assert verdict_of("complete", gate_doc("pass", []), "h100", "x") == "pass"


def test_flip_ledger_tells_noise_from_news(tmp_path):
    # question 0 flips every night (noise); question 1 is right until the newest night (news); question 2 never flips
    nights = [[True, True, True], [False, True, True], [True, True, True], [False, False, True]]
    for i, outcome in enumerate(nights):
        make_run(tmp_path, "m", DAY + dt.timedelta(days=i), cell_rows(outcome))
    make_run(tmp_path, "other", DAY + dt.timedelta(days=9), cell_rows([False, False, False]))  # not this model's
    store = HistoryStore(tmp_path)
    ledger = store.flip_ledger([f for f in store.folders() if f.model == "m"]).set_index("doc_id")
    assert sorted(ledger.index) == [0, 1]
    assert ledger.loc[0, "flips"] == 3 and ledger.loc[0, "runs"] == 4 and bool(ledger.loc[0, "in_latest"])
    assert ledger.loc[1, "flips"] == 1 and bool(ledger.loc[1, "in_latest"]) and not ledger.loc[1, "latest_correct"]


def test_cells_feed_history_unchanged(tmp_path):
    make_run(
        tmp_path, "m", DAY, cell_rows([True, False, True, True], shots=8, cache="off") + cell_rows([True, False, False, False], shots=8)
    )
    store = HistoryStore(tmp_path)
    cells = store.cells().set_index("cache")
    assert cells.loc["off", "strict_hits"] == 3 and cells.loc["on", "strict_hits"] == 1 and (cells["n"] == 4).all()
    trend = store.history("m", "accuracy", cache="on")
    assert list(trend["value"]) == [0.25] and len(trend) == 1
    with pytest.raises(ValueError, match="cannot narrow"):
        store.cells(model="m")


def test_settings_diff_only_when_recorded():
    def manifest(settings: dict | None) -> Manifest:
        entry = {"profile": "p", "variant": "v", "cache": "on"}
        return Manifest.model_validate(
            {"run_id": "r", "servers": [entry | ({"info": {"settings": settings}} if settings is not None else {})]}
        )

    assert settings_table(manifest(None), manifest(None)) is None
    assert settings_table(manifest({"x": [1]}), None) is None  # nothing to compare with
    assert settings_table(manifest({"a": 1, "b": "x"}), manifest({"a": 1, "b": "x"})).rows == []
    diff = settings_table(manifest({"mamba": "extra_buffer", "tp": 1}), manifest({"mamba": "auto", "tp": 1}))
    shown = dict(zip(diff.columns, diff.rows[0]))
    assert shown == {"profile": "p", "variant": "v", "cache": "on", "reference": "baseline run", "setting": "mamba", "before": "auto",
                     "after": "extra_buffer"}  # fmt: skip


def test_build_lists_runs_and_rebuilds_only_what_changed(tmp_path):
    root, site = tmp_path / "results", tmp_path / "site"
    first = make_run(root, "m", DAY, cell_rows([True] * 4))
    second = make_run(root, "m", DAY + dt.timedelta(days=1), cell_rows([True, True, False, True]))
    gate_json(first, "pass", [{"status": "pass", "profile": "cpu", "variant": "default"}])
    gate_json(second, "regression", [{"status": "regression", "profile": "cpu", "variant": "default"}], baseline=first.name)
    running = make_run(root, "m", DAY + dt.timedelta(days=2), cell_rows([True]), status="running")
    assert dict(zip(load_catalog([root]).runs["folder"], load_catalog([root]).runs["verdict"]))[running.name] == "incomplete"
    lock = RunLock(running).acquire("sweep")  # "running" is believed while its writer holds the lock
    catalog = load_catalog([root])
    lock.release()
    assert dict(zip(catalog.runs["folder"], catalog.runs["verdict"])) == {
        first.name: "pass",
        second.name: "regression",
        running.name: "running",
    }
    built = build_site(root, site)
    assert set(built.written) == {"index.html", "models/m.html", f"signoff/{first.name}.html", f"signoff/{second.name}.html"}
    page = (site / f"signoff/{second.name}.html").read_text()
    assert first.name in page and "REGRESSION" in page  # beside its baseline

    again = build_site(root, site)
    assert again.written == ["index.html"] and len(again.skipped) == 3
    gate_json(running, "pass", [])  # a change to one run: its own page and its model's page
    third = build_site(root, site)
    assert set(third.written) == {"index.html", "models/m.html", f"signoff/{running.name}.html"}


def test_page_names_are_safe_and_distinct():
    assert page_name("smollm2-135m") == "smollm2-135m"
    assert "/" not in page_name("org/model") and page_name("org/model") != page_name("org_model")
    assert page_name("../x") != page_name("x") and ".." not in page_name("../x")


def test_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(BadInput, match="not a directory"):
        build_site(tmp_path / "nope", tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_cli_refuses_a_missing_root_and_a_file_as_site(tmp_path):
    missing = cli("dashboard", "--root", str(tmp_path / "nope"), "-o", str(tmp_path / "site"))
    assert missing.returncode == ExitCode.BAD_INPUT and "is not a directory" in missing.stderr and not (tmp_path / "site").exists()
    (tmp_path / "file").write_text("kept")
    clash = cli("dashboard", "--root", str(tmp_path), "-o", str(tmp_path / "file"))
    assert clash.returncode == ExitCode.BAD_INPUT and "is not a folder" in clash.stderr and (tmp_path / "file").read_text() == "kept"


def test_where_a_configuration_turns_to_regression_the_page_shows_both_revisions_and_the_bisect(tmp_path):
    from evalctl.bisect.builds import Build
    from evalctl.bisect.state import BisectState, CellSpec, Settings
    from evalctl.schema import Variant

    root, site = tmp_path / "results", tmp_path / "site"
    nights = []
    for i, (verdict, revision) in enumerate(
        [("pass", "aaaa1111"), ("pass", "bbbb2222"), ("regression", "cccc3333"), ("regression", "dddd4444")]
    ):
        run = make_run(root, "m", DAY + dt.timedelta(days=i), cell_rows([True] * 4), revision=revision)
        gate_json(run, verdict, [{"status": verdict, "profile": "cpu", "variant": "default"}])
        nights.append(run)
    build_site(root, site)
    page = (site / "models/m.html").read_text()
    assert page.count('class="turned"') == 1  # only the first failing night, not the one after it
    assert "<b>bbbb2222</b> (last passing night)" in page and "<b>cccc3333</b> (this night)" in page
    assert f"evalctl bisect --from-run {nights[2]} --repo ENGINE_REPO --good bbbb2222 --bad cccc3333" in page

    builds = [
        Build(name=n, variant=Variant(), revision=r, subject=s)
        for n, r, s in [("g", "bbbb2222", "ok"), ("x", "c0ffee00", "Reuse cached state"), ("b", "cccc3333", "later")]
    ]
    cells = CellSpec(profile="cpu", variant="default", shots=[8], cache=["on"])
    settings = Settings(from_run=nights[2], cells=cells, step_alpha=0.02, target=0.95, max_launches=8)
    (root / "bisect-1").mkdir()
    BisectState(settings=settings, builds=builds, outcome="culprit", culprit=[1], probability=0.97).save(root / "bisect-1")
    rebuilt = build_site(root, site)
    assert "models/m.html" in rebuilt.written  # a finished bisect changes the page
    page = (site / "models/m.html").read_text()
    assert 'Bisect culprit: <b class="regression">c0ffee00 Reuse cached state</b> (posterior probability 0.970, bisect-1)' in page


def test_the_sign_off_page_of_a_concurrency_sweep_shows_every_level_in_the_gates_metric(tmp_path):
    root, site = tmp_path / "results", tmp_path / "site"
    rows = [r for level, ok in ((1, [True] * 4), (8, [True, False, False, True])) for r in cell_rows(ok, concurrency=level, cache="on")]
    for r in rows:  # the gate's metric (flexible) differs from the run's primary (strict): the page shows the gate's
        r["strict_correct"] = False
    run = make_run(root, "m", DAY, rows)
    check = {"kind": "accuracy", "name": "concurrency 8 vs 1", "profile": "cpu", "variant": "default", "cache": "on", "shots": 8}
    checks = [{**check, "status": "regression", "concurrency": 8}, {**check, "status": "pass", "concurrency": 1}]
    (run / "gate.json").write_text(gate_doc("regression", checks, run=run.name, policy={"metric": "flexible"}).to_json())
    build_site(root, site)
    page = (site / f"signoff/{run.name}.html").read_text()
    side = page[page.index("Candidate beside baseline (flexible accuracy") : page.index("Gate checks")]
    assert side.count("<tr") == 3 and "0.500" in side and "1.000" in side  # a header and a row per level, flexible
    assert ">concurrency<" in page[page.index("Gate checks") :]  # the matrix and the checks name the level
