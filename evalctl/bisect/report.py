"""What a bisect shows: the steps as a table (80 columns), and the regressed cells' accuracy across the builds tested."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from evalctl.bisect.search import Find, Verdict
from evalctl.bisect.state import BisectState, Step

PLOT_FILE = "bisect_accuracy.png"
VERDICT_STYLE = {Verdict.good: "green", Verdict.bad: "bold red", Verdict.unknown: "yellow", Verdict.skipped: "dim"}


def _accuracy(step: Step) -> str:
    if step.accuracy is None:
        return "-"
    ref = f" vs {step.reference_accuracy:.2f}" if step.reference_accuracy is not None and step.number else ""
    return f"{step.accuracy:.2f}{ref}"


def steps_table(state: BisectState) -> Table:
    cells = state.settings.cells
    table = Table(
        title=f"Bisect steps ({cells.profile}/{cells.variant}, shots {','.join(map(str, cells.shots))}, cache {','.join(cells.cache)})"
    )
    table.add_column("#", justify="right")
    table.add_column("build", max_width=30, overflow="ellipsis", no_wrap=True)
    table.add_column("pos", justify="right")
    table.add_column("questions", justify="right")
    table.add_column("accuracy vs ref")
    table.add_column("verdict")
    for step in state.steps:
        build = state.builds[step.build]
        verdict = "reference" if step.number == 0 else step.verdict.value if step.verdict else "running"
        style = VERDICT_STYLE.get(step.verdict, "") if step.number else "cyan"
        questions = f"{step.answered}/{step.planned}" if step.launched else "no launch"
        table.add_row(
            str(step.number), build.label, f"{step.build}/{len(state.builds) - 1}", questions, _accuracy(step), f"[{style}]{verdict}[/]"
        )
    return table


def accuracy_plot(state: BisectState, path: Path) -> Path:
    """Each tested build's accuracy (on the questions it answered) in commit order, the reference's as a line, the culprit marked."""
    import matplotlib.pyplot as plt

    from evalctl.report.plots import save_figure  # first: it selects the Agg backend; then pyplot

    fig, ax = plt.subplots(figsize=(7, 3.6))
    colours = {Verdict.good: "tab:green", Verdict.bad: "tab:red", Verdict.unknown: "tab:orange", Verdict.skipped: "tab:gray"}
    measured = [s for s in state.steps if s.accuracy is not None]
    for verdict, colour in colours.items():
        points = [s for s in measured if s.verdict is verdict and s.number]
        if points:
            ax.scatter([s.build for s in points], [s.accuracy for s in points], color=colour, label=verdict.value, zorder=3)
    if state.steps and state.steps[0].accuracy is not None:
        ax.axhline(state.steps[0].accuracy, color="tab:blue", linestyle="--", label="good build (reference)")
    # The change sits before a culprit, after a first fixed build (held newest first: search.search_order).
    side, what = (-0.5, "culprit") if state.settings.find is Find.regression else (0.5, "first fixed")
    for i in state.culprit if state.outcome == "culprit" else []:
        ax.axvline(i + side, color="tab:red", alpha=0.4, label=f"{what}: {state.builds[i].label[:24]}")
    failed = [i for i, b in enumerate(state.builds) if b.built is False]
    if failed:
        ax.scatter(failed, [0.0] * len(failed), marker="x", color="black", label="build failed")
    order = "commit order" if state.settings.find is Find.regression else "newest first"
    ax.set(xlabel=f"build ({order})", ylabel="accuracy", ylim=(-0.03, 1.03), xlim=(-0.5, len(state.builds) - 0.5))
    ax.set_title("Regressed cells' accuracy across the builds tested", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)
