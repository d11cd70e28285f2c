"""A guidellm report attached to a run, on its sign-off page: read by guidellm itself, or the extra named.

The fixture is guidellm 0.8.1's own JSON report (gzipped), of its mock server at 1, 4 and 8 concurrent streams:
guidellm mock-server --port P --model mock --ttft-ms 20 --itl-ms 5, then
guidellm run --backend kind=openai_http,target=http://127.0.0.1:P,model=mock --profile kind=concurrent,streams=1
--override profile.streams 1,4,8 --constraint kind=max_requests,count=16 --data kind=text_file,path=prompts.txt
--metrics '{"kind":"generative","sample_size":0,"slo":{"ttft_ms":40,"tpot_ms":10}}' --output kind=json,path=report.json
"""

from __future__ import annotations

import datetime as dt
import gzip
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from run_folders import cell_rows, make_run
from test_extras import evalctl_without

from evalctl.errors import BadInput, ExitCode
from evalctl.report import guidellm
from evalctl.report.html import write_report
from evalctl.runs import load_run

FIXTURE = Path(__file__).with_name("guidellm-0.8.1-mock.json.gz")
has_guidellm = importlib.util.find_spec("guidellm") is not None
needs_guidellm = pytest.mark.skipif(not has_guidellm, reason="evalctl's 'guidellm' extra is not installed")


def _run(root: Path) -> Path:
    return make_run(root, "m", dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc), cell_rows([True, False], cache="on", shots=8))


def _report(tmp_path: Path) -> Path:
    path = tmp_path / "benchmarks.json"
    path.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return path


@needs_guidellm
def test_guidellm_figures_are_shown_beside_evalctls(tmp_path):
    run = _run(tmp_path / "results")
    command = [sys.executable, "-m", "evalctl.cli", "report", str(run), "--attach-guidellm", str(_report(tmp_path))]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert guidellm.attached(run) == run / "guidellm.json"
    html = (run / "report.html").read_text()
    part = html[html.index('id="guidellm"') :]
    assert "guidellm 0.8.1, goodput objective" in part and "&#39;ttft_ms&#39;: 40.0" in part
    header = re.search(r"<thead>(.*?)</thead>", part, re.S).group(1)
    columns = re.findall(r"<th>(.*?)</th>", header)
    assert {"benchmark", "req/s", "goodput/s", "out tok/s", "ttft p99 ms", "in flight"} <= set(columns)
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>concurrent@.*?)</tr>", part)]
    assert [row[0] for row in rows] == ["concurrent@1", "concurrent@4", "concurrent@8"]
    assert [round(float(row[columns.index("in flight")])) for row in rows] == [1, 4, 8]  # the streams guidellm held


@needs_guidellm
def test_a_file_guidellm_cannot_read_is_refused_and_nothing_is_attached(tmp_path):
    run = _run(tmp_path / "results")
    bad = tmp_path / "bench.json"
    bad.write_text('{"benchmarks": 3}')
    with pytest.raises(BadInput, match="not a guidellm 0.8 benchmark report"):
        guidellm.attach(run, bad)
    assert guidellm.attached(run) is None


@pytest.mark.skipif(has_guidellm, reason="shows what a venv without the extra does")
def test_without_the_extra_attaching_names_it_and_a_report_says_why_it_shows_none(tmp_path):
    run = _run(tmp_path / "results")
    out = evalctl_without("guidellm", "report", str(run), "--attach-guidellm", str(_report(tmp_path)))
    assert out.returncode == ExitCode.BAD_INPUT and "from evalctl's 'guidellm' extra" in " ".join(out.stderr.split())
    assert guidellm.attached(run) is None
    (run / "guidellm.json").write_bytes(_report(tmp_path).read_bytes())  # attached where the extra was installed
    write_report(load_run(run), run / "report.html")
    assert "not shown: reading it needs evalctl&#39;s &#39;guidellm&#39; extra" in (run / "report.html").read_text()
