"""The HTML report from hand-built run folders: escaping, gate matrix, probes, baseline, links, history."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
from analysis.frames import sample_frame
from conftest import gate_doc
from run_folders import cell_rows, make_run

from evalctl.analysis.accuracy import accuracy_table
from evalctl.errors import ExitCode
from evalctl.report import plots
from evalctl.report.html import write_report
from evalctl.report.signoff import signoff_matrix
from evalctl.runs import load_run

DAY = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
XSS = "<script>alert(1)</script>"
XSS_IMG = '<img src=x onerror="alert(2)">'


def paired_run(root: Path, created_at: dt.datetime = DAY, on_correct: list[bool] | None = None, **kw) -> Path:
    off = cell_rows([True, True, False], cache="off", shots=2) + cell_rows([True, True, False], cache="off", shots=8)
    on = cell_rows([True, True, False], cache="on", shots=2) + cell_rows(on_correct or [True, False, False], cache="on", shots=8)
    servers = [
        {"profile": "cpu", "variant": "default", "cache": c, "engine": "llamacpp", "argv": ["python", "-m", "srv", "--cache", c],
         "log": f"server-cpu-default-cache-{c}.log", "info": {"version": "1.2.3"}, "status": "ok"}
        for c in ("on", "off")
    ]  # fmt: skip
    run = make_run(root, "m", created_at, off + on, servers=servers, **kw)
    for c in ("on", "off"):
        (run / f"server-cpu-default-cache-{c}.log").write_text("log\n")
    return run


def render(run: Path, out: Path | None = None, baseline: Path | None = None, **kw) -> str:
    out = out or run / "report.html"
    write_report(load_run(run), out, baseline=load_run(baseline) if baseline else None, **kw)
    return out.read_text()


def test_text_from_model_and_dataset_is_shown_escaped_never_as_markup(tmp_path):
    off = cell_rows([True], cache="off", shots=8, question=f"What is {XSS_IMG}?")
    on = cell_rows([False], cache="on", shots=8, question=f"What is {XSS_IMG}?", response=f"The answer {XSS}", strict_answer=XSS)
    run = make_run(tmp_path, "m", DAY, off + on, servers=[{"profile": "cpu", "variant": "default", "cache": "on", "argv": [XSS]}])
    (run / "probe-x.json").write_text(json.dumps({"verdict": XSS, "rows": [{"bin": XSS_IMG, "acc": 0.5}]}))
    check = {"name": XSS, "profile": "cpu", "variant": "default", "cache": "on", "shots": 8, "status": "regression", "reason": XSS}
    gate = gate_doc("regression", [check], run=run.name)
    html = render(run, gate=gate)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, as text
    assert "&lt;img src=x onerror=" in html
    assert "<script" not in html.lower()  # the report itself has no script, and none got in
    assert "<img src=x" not in html
    # the flipped question is the one carrying the markup
    assert re.search(r"What is &lt;img src=x onerror=&#34;alert\(2\)&#34;&gt;\?", html)


def test_gate_checks_colour_the_signoff_matrix():
    acc = accuracy_table(sample_frame(cell_rows([True, False], cache="on", shots=2) + cell_rows([True], cache="on", shots=8)
                                      + cell_rows([True], cache="off", shots=2)))  # fmt: skip
    checks = [
        {"name": "cache-2", "profile": "cpu", "variant": "default", "cache": "on", "shots": 2, "pass_index": 1, "status": "pass"},
        {"name": "cache-8", "profile": "cpu", "variant": "default", "cache": "on", "shots": 8, "status": "pass"},
        {"name": "base-8", "profile": "cpu", "variant": "default", "cache": "on", "shots": 8, "status": "regression", "reason": "drop"},
    ]
    matrix = signoff_matrix(acc, checks)
    assert matrix.shots == [2, 8]
    rows = {key: cells for key, cells in matrix.rows}
    on = rows[("cpu", "default", "on", 4)]
    assert [c.status for c in on] == ["pass", "regression"]  # a cell is as bad as its worst check
    assert on[0].accuracy == 0.5 and any("drop" in r for r in on[1].reasons)
    off = rows[("cpu", "default", "off", 4)]
    assert [c.status for c in off] == ["unchecked", "unchecked"] and off[1].accuracy is None
    assert {c.status for _, cells in signoff_matrix(acc, None).rows for c in cells} == {"not gated"}


def test_a_failed_absolute_cap_is_named_in_the_matrix_not_called_a_regression(tmp_path):
    run = paired_run(tmp_path)
    cap = {"name": "invalid rate", "kind": "invalid_rate", "profile": "cpu", "variant": "default", "cache": "off", "shots": 8,
           "pass_index": 1, "status": "regression", "reason": "3 of 3 answers had no strict answer (100.0%; max 10.0%)"}  # fmt: skip
    gate = gate_doc("regression", [cap], run=run.name)
    html = render(run, gate=gate)
    matrix = html[html.index('id="signoff"') : html.index("</table>", html.index('id="signoff"'))]
    assert "<small>invalid rate over cap</small>" in matrix and "<small>regression</small>" not in matrix
    assert 'class="cell regression"' in matrix  # still coloured as failing


def test_a_cell_that_failed_a_cap_and_its_accuracy_check_is_named_by_the_accuracy_verdict():
    acc = accuracy_table(sample_frame(cell_rows([False, False], cache="on", shots=2)))
    cell = {"profile": "cpu", "variant": "default", "cache": "on", "shots": 2, "pass_index": 1, "status": "regression"}
    checks = [{"name": "invalid rate", "kind": "invalid_rate", **cell}, {"name": "run vs baseline", "kind": "accuracy", **cell}]
    (shown,) = signoff_matrix(acc, checks).rows[0][1]
    assert (shown.status, shown.label) == ("regression", "regression")


def test_report_reads_gate_json_else_says_not_gated(tmp_path):
    run = paired_run(tmp_path)
    html = render(run)
    assert "NOT GATED" in html and 'class="cell not-gated"' in html and 'class="cell pass"' not in html
    gate = {"verdict": "regression", "exit_code": 1, "policy": {"alpha": 0.05}, "run": run.name, "baseline": None, "cliffs": [{"shots": 8}],
            "checks": [{"name": "cache on vs off", "kind": "cache", "profile": "cpu", "variant": "default", "cache": "on", "shots": 8,
                        "pass_index": 1, "status": "regression", "reason": "b=1 c=0", "p_adjusted": 0.01},
                       {"name": "cache on vs off", "kind": "cache", "profile": "cpu", "variant": "default", "cache": "on", "shots": 2,
                        "pass_index": 1, "status": "pass", "reason": "no flips"}]}  # fmt: skip
    (run / "gate.json").write_text(gate_doc(**gate).to_json())
    html = render(run)
    assert 'class="verdict regression">REGRESSION' in html
    assert html.count('class="cell regression"') == 1 and html.count('class="cell pass"') == 1
    assert "Cliffs" in html and "b=1 c=0" in html


def test_probes_cache_flips_ratios_and_relative_log_links(tmp_path):
    run = paired_run(tmp_path / "results")
    (run / "probe-prefix.json").write_text(json.dumps({"verdict": "regression", "model": "m", "bins": [
        {"prefix_tokens": 512, "accuracy": 0.9}, {"prefix_tokens": 4096, "accuracy": 0.2}]}))  # fmt: skip
    out_dir = tmp_path / "elsewhere"
    out_dir.mkdir()
    html = render(run, out_dir / "r.html")
    assert "probe-prefix.json" in html and "<th>prefix_tokens</th>" in html and "4096" in html
    assert "cache on vs cache off: 1 flipped" in html and "right-&gt;wrong" in html
    assert "Cache on / cache off" in html and "req/s ratio" in html
    assert "python -m srv --cache on" in html
    hrefs = re.findall(r'class="log" href="([^"]+)"', html)
    assert len(hrefs) == 2 and all((out_dir / h).resolve().is_file() for h in hrefs)
    assert "no earlier runs" in html


def test_baseline_comparison_and_history_trend(tmp_path):
    base = paired_run(tmp_path, DAY, on_correct=[True, True, False])
    run = paired_run(tmp_path, DAY + dt.timedelta(days=1))
    html = render(run, baseline=base)
    assert f"this run vs baseline {base.name}: 1 flipped" in html
    assert "This run / baseline" in html
    assert 'id="plot-history"' in html and html.count("data:image/png;base64,") == 5  # shots, prefill, load, Pareto, history
    assert f"<td>{base.name}</td>" in html and f"<td>{run.name}</td>" in html  # both runs in the trend table
    assert "no earlier runs" in render(base)  # a run's history is its past, not later nights


def test_throughput_at_each_load_level_is_tabled_and_plotted(tmp_path):
    cells = [
        row | {"ttft_s": 0.1 * level, "itl_s": 0.01, "latency_s": 1.0 + level / 8}
        for level in (1, 8)
        for cache in ("off", "on")
        for row in cell_rows([True, True, False], cache=cache, shots=8, concurrency=level)
    ]
    html = render(make_run(tmp_path, "m", DAY, cells))
    assert 'id="plot-load"' in html and 'id="plot-pareto"' in html
    header = re.search(r'<section id="throughput">.*?<thead>(.*?)</thead>', html, re.S).group(1)
    assert all(f"<th>{c}</th>" in header for c in ("concurrency", "out tok/s", "tok/s/user", "ttft p99 ms", "itl p90 ms"))
    assert "goodput/s" not in header  # the run states no objective


def test_report_cli_writes_into_the_run_folder_by_default_and_refuses_a_missing_run(tmp_path):
    run = paired_run(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    ok = subprocess.run([sys.executable, "-m", "evalctl.cli", "report", str(run)], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert (run / "report.html").is_file()
    bad = subprocess.run([sys.executable, "-m", "evalctl.cli", "report", str(tmp_path / "nope")], capture_output=True, text=True, env=env)
    assert bad.returncode == ExitCode.BAD_INPUT and "is not a directory" in " ".join(bad.stderr.split())


def test_recall_runs_get_the_answer_position_section_with_a_baseline(tmp_path):
    positions = ["start", "middle", "end"]
    rows = [
        {**row, "answer_position": positions[row["doc_id"] % 3]}
        for cache, correct in (("off", [True] * 6), ("on", [False, True, True, False, True, True]))
        for row in cell_rows(correct, cache=cache, shots=104)
    ]
    run = make_run(tmp_path, "m-recall", DAY, rows)
    html = render(run, baseline=make_run(tmp_path, "m-recall", DAY, rows))
    assert "By answer position in the prefix" in html and 'id="plot-position"' in html
    section = html[html.index("By answer position") : html.index('id="plot-position"')]
    first_seen = [section.index(f">{p}<") for p in positions]
    assert first_seen == sorted(first_seen)  # every bin, in prompt order
    assert "0.00" in section  # cache on lost every start record
    assert "By answer position" not in render(paired_run(tmp_path))  # GSM8K runs have no positions


def test_a_reference_cell_that_passed_only_its_own_caps_is_a_reference_not_a_pass():
    acc = accuracy_table(sample_frame(cell_rows([False, False], cache="off", shots=2) + cell_rows([False, False], cache="on", shots=2)))
    cell = {"profile": "cpu", "variant": "default", "shots": 2, "pass_index": 1, "status": "pass"}
    checks = [
        {"name": "invalid rate", "kind": "invalid_rate", "cache": "off", **cell},
        {"name": "cache engaged", "kind": "cache-engaged", "cache": "off", **cell},
        {"name": "invalid rate", "kind": "invalid_rate", "cache": "on", **cell},
        {"name": "cache on vs off", "kind": "accuracy", "cache": "on", "metric": "flexible accuracy drop", **cell},
    ]
    rows = dict(signoff_matrix(acc, checks).rows)
    (off,), (on,) = rows[("cpu", "default", "off", 4)], rows[("cpu", "default", "on", 4)]
    assert (off.status, off.label) == ("reference", "reference")  # 0.00 accuracy is not coloured "pass" for its caps
    assert (on.status, on.label) == ("pass", "pass (flexible accuracy drop)")  # judged, and by which metric


def test_the_header_names_each_build_by_its_pip_pins_or_revision(tmp_path):
    run = paired_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["variants"] = [{"name": "fixed", "pip": ["xllamacpp==2026.6.9713"]}, {"name": "local"}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "fixed @ xllamacpp==2026.6.9713; local @ -" in render(run)
    assert "default @ feedbeef" in render(paired_run(tmp_path / "again"))


def test_a_run_of_one_load_level_draws_throughput_against_prefill_length(monkeypatch, tmp_path):
    """One level and several lengths (the default sweep): the load plot's x axis is the prompt length, one point per
    length; several levels: the requests in flight."""
    drawn = {}
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.update(ax=fig.axes[0]) or path)
    rows = [
        {"profile": "cpu", "variant": "default", "cache": cache, "shots": shots, "concurrency": level, "pass_index": 1,
         "output_tokens_per_s": 10.0 + shots, "mean_prompt_tokens": 9.0 * shots, "user_tokens_per_s": 2.0}
        for cache in ("on", "off") for shots in (50, 60, 70) for level in (4,)
    ]  # fmt: skip
    plots.throughput_vs_concurrency(pd.DataFrame(rows), tmp_path / "p.png", "t")
    assert drawn["ax"].get_xlabel().startswith("prompt tokens")
    assert [len(line.get_xdata()) for line in drawn["ax"].get_lines()] == [3, 3]
    levels = pd.DataFrame([r | {"concurrency": c} for r in rows for c in (1, 8)])
    plots.throughput_vs_concurrency(levels, tmp_path / "p.png", "t")
    assert drawn["ax"].get_xlabel().startswith("concurrency")
