"""The report of a real CPU run, opened in headless Chromium: it loads clean and shows what a release manager needs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import cli

from evalctl.errors import VERDICT_EXIT

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "results" / "report-screenshot.png"
KEY_IDS = [
    "header",
    "verdict",
    "signoff",
    "plot-shots",
    "plot-prefill",
    "throughput",
    "probes",
    "flips",
    "servers",
    "history",
    "plot-history",
]

chromium = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(chromium is None, reason="Debian's chromium is not installed (.ci/run installs it)")


def browse(page: Path, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a file, offline, with the page's console messages logged to stderr."""
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
            "--window-size=1280,3600", *mode, page.resolve().as_uri()]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """Chromium logs every console message of the page (errors, uncaught exceptions, CSP refusals) as CONSOLE."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def screenshot(page: Path, tmp: Path, shot: Path) -> Path:
    """`page` as Chromium shows it at 1280 px, saved to `shot` (to look at), after a clean load."""
    shot.parent.mkdir(parents=True, exist_ok=True)
    done = browse(page, tmp, f"--screenshot={shot}")
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    print(f"screenshot: {shot}")
    return shot


@needs_chromium
def test_console_check_catches_a_page_error(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    assert any("Uncaught Error: boom" in m for m in console_messages(browse(page, tmp_path, "--dump-dom").stderr))


@needs_chromium
@pytest.mark.server
def test_report_of_a_real_cpu_run_renders_in_chromium(launched_run, tmp_path):
    # The session's launched sweep, copied: the gate, the probe's file and the report are written into it.
    root = tmp_path / "results"
    run = root / launched_run.run.name
    shutil.copytree(launched_run.run, run)

    # An earlier night: the same run copied back a day, as baseline and as a point of history.
    manifest = json.loads((run / "manifest.json").read_text())
    earlier_id = "20000101-000000-smollm2-135m-000000"
    earlier = root / earlier_id
    shutil.copytree(run, earlier)
    (earlier / "manifest.json").write_text(json.dumps({**manifest, "run_id": earlier_id, "created_at": "2000-01-01T00:00:00+00:00"}))
    # The real gate, against the earlier night; the probe's file (documented schema) is rendered when present.
    gated = cli("gate", str(run), "--baseline", str(earlier))
    verdict = json.loads((run / "gate.json").read_text())["verdict"]
    assert gated.returncode == VERDICT_EXIT[verdict], gated.stderr
    (run / "probe-prefix.json").write_text(json.dumps({"verdict": "pass", "note": "<script>document.title='pwned'</script>",
                                                       "bins": [{"prefix_tokens": 256, "accuracy": 0.0}]}))  # fmt: skip

    report = run / "report.html"
    made = cli("report", str(run), "--baseline", str(earlier), "-o", str(report))
    assert made.returncode == 0, made.stderr

    dom = browse(report, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    missing = [i for i in KEY_IDS if f'id="{i}"' not in dom.stdout]
    assert not missing, f"elements missing from the page: {missing}"
    assert "<title>evalctl report:" in dom.stdout and "pwned" not in re.search(r"<title>(.*?)</title>", dom.stdout).group(1)
    assert "&lt;script&gt;document.title" in dom.stdout
    assert verdict.upper() in dom.stdout and re.search(r'class="cell (pass|regression|inconclusive)"', dom.stdout)
    assert "llamacpp_main.py" in dom.stdout

    SCREENSHOT.parent.mkdir(exist_ok=True)
    shot = browse(report, tmp_path, f"--screenshot={SCREENSHOT}")
    assert shot.returncode == 0 and SCREENSHOT.stat().st_size > 10_000, shot.stderr[-2000:]
    assert console_messages(shot.stderr) == []
    print(f"report screenshot: {SCREENSHOT}")
