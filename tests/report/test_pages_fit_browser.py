"""Every page kind as a user sees it, in headless Chromium at 1280 px: plots, captions and tables fit.

Six nights of one model under a long configuration name (the trends page's titles), cache on
and off at 2 and 8 shots plus a 112-shot cell that only two nights ran, no streamed request
(so no TTFT trend), each night gated with the built-in policy (whose `checks` is an empty
mapping) and a nights table wider than the page. Issue 35 found on such pages a figure title
cut at both ends, a caption beside an empty slot, a legend naming a series the plot did not
show, the nights table scrolling the page sideways and "checks {}" in the sign-off's verdict
table. Screenshots go to results/page-screenshots/ (look at them); the layout is measured in
the browser by a copy of each page with a script that reports what overflows.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import gate_doc
from run_folders import cell_rows, make_run
from test_report_browser import browse, needs_chromium, screenshot

from evalctl.dashboard.build import build_site
from evalctl.report import plots
from evalctl.report.html import write_report
from evalctl.runs import load_run

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "results" / "page-screenshots"
DAY = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
MODEL = "smollm2-135m-recall"
PROFILE = "external-llamacpp-served-by-a-long-configuration-name"
WIDTH = 1280
# Reports, into the page's title, the page's own width and every table or image wider than the window.
MEASURE = """<script>
const wide = [...document.querySelectorAll('table, img, pre')].filter(e => e.getBoundingClientRect().right > innerWidth + 1);
document.title = JSON.stringify({page: document.documentElement.scrollWidth, window: innerWidth,
  wide: wide.map(e => e.tagName + '.' + e.className)});
</script>"""


def night(root: Path, i: int, long_cell: bool) -> Path:
    rows = []
    for cache in ("off", "on"):
        for shots in (2, 8, *((112,) if long_cell else ())):
            every = {2: 3, 8: 4, 112: 2}[shots]  # each cell its own accuracy: lines that do not hide each other
            right = [q % every != 0 or (cache == "off" and i % 2 == 0) for q in range(12)]
            rows += cell_rows(right, cache=cache, shots=shots, profile=PROFILE, ttft_s=None)
    run = make_run(root, MODEL, DAY + dt.timedelta(days=i), rows, revision=f"rev{i}")
    checks = [{"name": "cache on vs off", "kind": "accuracy", "profile": PROFILE, "variant": "default", "cache": "on", "shots": s,
               "pass_index": 1, "status": "pass" if i % 2 else "regression",
               "reason": "drop within 0.030" if i % 2 else "drop beyond 0.030"} for s in (2, 8)]  # fmt: skip
    (run / "gate.json").write_text(gate_doc("pass" if i % 2 else "regression", checks, run=run.name).to_json())
    return run


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("pages")
    root = tmp / "results"
    runs = [night(root, i, long_cell=i >= 4) for i in range(6)]
    built = tmp / "site"
    build_site(root, built)
    newest = runs[-1]
    report = tmp / "report.html"
    write_report(load_run(newest), report, baseline=load_run(runs[-2]), gate=gate_doc("pass", [], run=newest.name))
    pages = {
        "report": report,
        "signoff": built / "signoff" / f"{newest.name}.html",
        "index": built / "index.html",
        "trends": next((built / "models").iterdir()),
    }
    return {"tmp": tmp, "pages": pages}


def measured(page: Path, tmp: Path) -> dict:
    """The layout of `page` at 1280 px, from a copy whose script measures it (the page's policy allows none)."""
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    copy = page.with_name(f"measured-{page.name}")
    copy.write_text(html.replace("</body>", MEASURE + "</body>"))
    dom = browse(copy, tmp, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return json.loads(re.search(r"<title>(.*?)</title>", dom.stdout, re.S).group(1).replace("&quot;", '"'))


@needs_chromium
@pytest.mark.parametrize("kind", ["report", "signoff", "index", "trends"])
def test_each_page_kind_fits_1280_px_and_shows_no_empty_slot(site, kind):
    page, tmp = site["pages"][kind], site["tmp"]
    html = page.read_text()
    layout = measured(page, tmp)
    assert layout["window"] == WIDTH and layout["page"] <= WIDTH, layout  # nothing scrolls the page sideways
    assert layout["wide"] == [], layout  # a wide table scrolls inside its own box
    assert "<dd>{}</dd>" not in html and "checks {}" not in re.sub(r"<[^>]+>", " ", html).replace("  ", " ")
    for figure in re.findall(r"<figure>.*?</figure>", html, re.S):
        assert "<img" in figure, figure  # no caption without its plot
    screenshot(page, tmp, SHOTS / f"{kind}.png")


def test_the_trends_page_names_the_plot_it_has_nothing_for_once_without_a_slot(site):
    html = site["pages"]["trends"].read_text()
    assert 'class="plot-accuracy"' in html and 'class="plot-ttft"' not in html
    assert re.search(r'class="muted unplotted">Not plotted, nothing recorded in these runs: [^<]*time to first token', html)


def test_a_long_title_wraps_inside_the_figure():
    fig, ax = plt.subplots(figsize=(7, 4.5))
    title = f"{MODEL} {PROFILE}/default: median time to first token at the longest prefix (streamed requests)"
    plots.set_title(ax, title)
    fig.tight_layout()
    fig.canvas.draw()
    box, frame = ax.title.get_window_extent(), fig.bbox
    assert box.x0 >= frame.x0 and box.x1 <= frame.x1 and "\n" in ax.get_title()
    assert "".join(ax.get_title().split()) == "".join(title.split())  # wrapped (a word longer than a line: split), never cut
    plt.close(fig)


def test_a_series_with_nothing_to_draw_is_not_in_the_legend(monkeypatch):
    shown = {}

    def keep_legend(fig, path):
        shown["labels"] = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "save_figure", keep_legend)
    when = pd.Timestamp(DAY)
    table = pd.DataFrame(
        [
            {"profile": "cpu", "variant": "default", "cache": "on", "shots": s, "created_at": when, "value": v, "lo": None, "hi": None}
            for s, v in ((8, 0.5), (112, float("nan")))
        ]  # fmt: skip
    )
    plots.history_trend(table, Path("unused.png"), "accuracy")
    assert shown["labels"] == ["cache on 8-shot"]  # one profile: named in the title, not in each label


def test_a_concurrency_sweep_at_one_shot_count_labels_its_axis_with_whole_numbers(monkeypatch):
    ticks = {}

    def keep_ticks(fig, path):
        fig.canvas.draw()
        lo, hi = fig.axes[0].get_xlim()
        ticks[path.name] = [t.get_text() for t in fig.axes[0].get_xticklabels() if lo <= t.get_position()[0] <= hi]
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "save_figure", keep_ticks)
    row = {"profile": "cpu", "variant": "default", "shots": 4, "pass_index": 1}
    row |= {"flexible_acc": 0.66, "flexible_lo": 0.53, "flexible_hi": 0.76}
    table = pd.DataFrame([{**row, "cache": c, "concurrency": n} for c in ("on", "off") for n in (1, 8, 32)])
    plots.accuracy_vs_shots(table, Path("shots.png"), "t", "flexible")
    plots.accuracy_vs_prefill(table.assign(bin_lo=60, bin_hi=67), Path("prefill.png"), "t", metric="flexible")
    assert ticks["shots.png"] == ["4"]  # six points dodged around it, not read as 3.98, 3.99, ...
    assert all(label.lstrip("−-").isdigit() for label in ticks["prefill.png"]), ticks
