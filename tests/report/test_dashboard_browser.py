"""The dashboard over real CPU runs, opened in headless Chromium: each night listed with the right verdict.

Five nights of SmolLM2-135M on the session's shared llama.cpp CPU server (sweeps with --url):
night 1 gated alone (inconclusive: nothing to compare), night 2 gated
against night 1 (pass), night 3 through the lost-prefix canary gated against night 2
(regression), night 4 stopped by SIGTERM (incomplete), night 5 still running while the site
is built. The questions are one-digit sums a 135M model answers in the few-shot format
("#### N"), so the canary's lost few-shot prefix shows as answers without that format.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import cli, evalctl, processes_of, start_canary
from test_report_browser import browse, console_messages, needs_chromium, screenshot

from evalctl.errors import VERDICT_EXIT, ExitCode

# slow, and not Chromium's only check: they rotate (docs/testing.md's slice table);
# test_pages_fit_browser.py still renders each page kind in Chromium every run
pytestmark = [needs_chromium, pytest.mark.server, pytest.mark.rotating(slice=2)]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "results" / "dashboard-screenshots"
# A tiny gate for 8 questions: every check that can decide does; throughput is too noisy to.
# Tolerances a night of 8 questions can show: 0.4 for accuracy and for first attempts.
POLICY = (
    "metric: strict\nmax_accuracy_drop: 0.4\nmax_first_attempt_failure_increase: 0.4\nalpha: 0.05\nmin_n: 1\n"
    "max_invalid_rate: 0.5\nmax_throughput_drop: null\n"
)
PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.body.innerHTML='pwned'\">"


def write_sums(folder: Path, questions: int) -> Path:
    """GSM8K-shaped files of one-digit sums."""
    rng = random.Random(7)
    folder.mkdir(parents=True)
    for name, n in (("train.jsonl", 4), ("test.jsonl", questions)):
        rows = [(rng.randint(1, 9), rng.randint(1, 9)) for _ in range(n)]
        lines = [json.dumps({"question": f"What is {a} plus {b}?", "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}) for a, b in rows]
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def sweep_args(url: str, data: Path, root: Path, limit: int) -> list[str]:
    return ["sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--url", url, "--shots", "2", "--cache", "on", "--limit", str(limit),
            "--max-tokens", "16", "--concurrency", "2", "--data-dir", str(data), "--output", str(root)]  # fmt: skip


def newest(root: Path, known: set[Path]) -> Path:
    (run,) = [p for p in root.iterdir() if p.is_dir() and p not in known]
    known.add(run)
    return run


def start_sweep(args: list[str], root: Path, known: set[Path]) -> tuple[subprocess.Popen, Path]:
    """A sweep in the background, returned once its run folder holds a first record."""
    proc = subprocess.Popen([sys.executable, "-m", "evalctl.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        runs = [p for p in root.iterdir() if p.is_dir() and p not in known]
        if runs and (runs[0] / "records.jsonl").is_file() and (runs[0] / "records.jsonl").stat().st_size > 0:
            return proc, newest(root, known)
        time.sleep(1)
    proc.kill()
    raise AssertionError(f"sweep wrote no record: {proc.communicate()}")


def gate(run: Path, baseline: Path | None, policy: Path) -> str:
    out = cli("gate", str(run), "--policy", str(policy), *(["--baseline", str(baseline)] if baseline else []))
    verdict = json.loads((run / "gate.json").read_text())["verdict"]
    assert out.returncode == VERDICT_EXIT[verdict], out.stderr
    return verdict


@pytest.fixture(scope="module")
def nights(tmp_path_factory, cpu_server):
    tmp = tmp_path_factory.mktemp("dashboard")
    data, root, site = write_sums(tmp / "data", 200), tmp / "results", tmp / "site"
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    root.mkdir()
    canary, canary_url = start_canary(cpu_server)
    running = None
    try:
        known: set[Path] = set()
        runs = {}
        for night, url in (("night1", cpu_server), ("night2", cpu_server), ("night3", canary_url)):
            out = evalctl(*sweep_args(url, data, root, 8))
            assert out.returncode in (ExitCode.PASS, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE, ExitCode.RUN_FAILED), out.stderr
            runs[night] = newest(root, known)
        verdicts = {
            "night1": gate(runs["night1"], None, policy),
            "night2": gate(runs["night2"], runs["night1"], policy),
            "night3": gate(runs["night3"], runs["night2"], policy),
        }
        stopped, runs["night4"] = start_sweep(sweep_args(cpu_server, data, root, 200), root, known)
        stopped.send_signal(signal.SIGTERM)
        stopped.communicate(timeout=300)
        running, runs["night5"] = start_sweep(sweep_args(cpu_server, data, root, 200), root, known)
        built = cli("dashboard", "--root", str(root), "-o", str(site))
        assert json.loads((runs["night5"] / "manifest.json").read_text())["status"] == "running"  # still, after the build
        yield {"root": root, "site": site, "runs": runs, "verdicts": verdicts, "built": built, "tmp": tmp}
    finally:
        if running is not None:
            running.send_signal(signal.SIGTERM)
            running.communicate(timeout=300)
        canary.terminate()
        canary.communicate(timeout=30)
        left = processes_of(tmp)
        for proc in left:
            proc.kill()
        assert not left, f"processes left behind: {left}"


def index_rows(dom: str) -> dict[str, str]:
    return {
        m["run"]: m["verdict"] for m in re.finditer(r'<tr class="run" data-run="(?P<run>[^"]+)"[^>]*data-verdict="(?P<verdict>[^"]+)"', dom)
    }


def test_index_lists_every_night_with_its_verdict(nights):
    assert nights["built"].returncode == 0, nights["built"].stderr
    # the gate itself decided pass and regression: the dashboard shows, never recomputes
    assert nights["verdicts"] == {"night1": "inconclusive", "night2": "pass", "night3": "regression"}
    index = nights["site"] / "index.html"
    dom = browse(index, nights["tmp"], "--dump-dom")
    assert dom.returncode == 0 and console_messages(dom.stderr) == []
    expected = {"night1": "inconclusive", "night2": "pass", "night3": "regression", "night4": "incomplete", "night5": "running"}
    assert index_rows(dom.stdout) == {nights["runs"][night].name: verdict for night, verdict in expected.items()}
    # the gated nights link their sign-off page and (written by the sweep) their report, both copied into the site
    for night in ("night1", "night2", "night3"):
        name = nights["runs"][night].name
        assert (nights["site"] / "signoff" / f"{name}.html").is_file() and (nights["site"] / "reports" / f"{name}.html").is_file()
    screenshot(index, nights["tmp"], SHOTS / "index.png")


def test_model_page_and_signoff_page(nights):
    site, runs = nights["site"], nights["runs"]
    model = site / "models" / "smollm2-135m.html"
    dom = browse(model, nights["tmp"], "--dump-dom")
    assert dom.returncode == 0 and console_messages(dom.stderr) == []
    assert 'class="plot-accuracy"' in dom.stdout and 'class="plot-throughput"' in dom.stdout
    # night 3 (the latest complete night) lost the few-shot prefix: questions right until then flip for the first time
    assert 'id="ledger-first"' in dom.stdout
    screenshot(model, nights["tmp"], SHOTS / "model.png")

    signoff = site / "signoff" / f"{runs['night3'].name}.html"
    dom = browse(signoff, nights["tmp"], "--dump-dom")
    assert dom.returncode == 0 and console_messages(dom.stderr) == []
    assert "REGRESSION" in dom.stdout and runs["night2"].name in dom.stdout  # beside its baseline, night 2
    assert re.search(r'class="cell regression"', dom.stdout)
    # /props settings are recorded per server; nights 2 and 3 ran on the same server
    assert "invalid rate" in dom.stdout and "identical to the baseline's" in dom.stdout
    screenshot(signoff, nights["tmp"], SHOTS / "signoff.png")


def test_model_output_with_html_shows_as_text(nights, tmp_path):
    """A night whose answers, questions and model name are markup: the pages show the text, nothing runs."""
    root = tmp_path / "results"
    root.mkdir()
    night2, night3 = nights["runs"]["night2"], nights["runs"]["night3"]
    # night 2 again, a night later (night 3's id and date), its answers inverted and made markup
    hostile = root / night3.name
    shutil.copytree(night2, root / night2.name)
    shutil.copytree(night2, hostile)
    samples = pd.read_parquet(hostile / "samples.parquet")
    samples = samples.assign(response=PAYLOAD, strict_answer=PAYLOAD, question=PAYLOAD + samples["question"])
    samples["strict_correct"] = ~samples["strict_correct"].astype(bool)  # every question flips
    samples.to_parquet(hostile / "samples.parquet", index=False)
    later = json.loads((night3 / "manifest.json").read_text())
    for run in (root / night2.name, hostile):
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["config"]["model"] = "<b>smol</b>"
        if run == hostile:
            manifest.update(run_id=later["run_id"], created_at=later["created_at"])
        (run / "manifest.json").write_text(json.dumps(manifest))
    site = tmp_path / "site"
    built = cli("dashboard", "--root", str(root), "-o", str(site))
    assert built.returncode == 0, built.stderr
    (model,) = (site / "models").iterdir()
    for page in (site / "index.html", model, site / "signoff" / f"{hostile.name}.html"):
        dom = browse(page, tmp_path, "--dump-dom")
        assert dom.returncode == 0 and console_messages(dom.stderr) == []
        assert "pwned" not in re.search(r"<title>(.*?)</title>", dom.stdout).group(1)
        assert "<script>" not in dom.stdout and "<b>smol</b>" not in dom.stdout
        assert "&lt;b&gt;smol&lt;/b&gt;" in dom.stdout
    assert "&lt;script&gt;document.title=" in browse(model, tmp_path, "--dump-dom").stdout
    screenshot(model, tmp_path, SHOTS / "hostile-model.png")
