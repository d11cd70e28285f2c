"""The gate's files: gate.json (machine-readable), JUnit XML (CI test reports), Markdown (PR comment)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evalctl.analysis.gate import GateResult
from evalctl.analysis.gate_document import GATE_FILE, GateDocument
from evalctl.fsio import write_atomic
from evalctl.report.terminal import evidence_lines

GATE_JUNIT = "gate-junit.xml"
GATE_MARKDOWN = "gate-summary.md"
_ICON = {"pass": "✅", "regression": "❌", "inconclusive": "⚠️", "warning": "🔶"}


def junit_xml(result: GateResult) -> bytes:
    """One testcase per check: <failure> for a regression, <skipped> for inconclusive."""
    checks = result.checks
    count = {s: sum(c.status == s for c in checks) for s in ("regression", "inconclusive")}
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"evalctl gate {result.run}",
        tests=str(len(checks)),
        failures=str(count["regression"]),
        skipped=str(count["inconclusive"]),
        errors="0",
    )
    for check in checks:
        name = f"{check.name} [{check.where}]" if check.where else check.name
        case = ET.SubElement(suite, "testcase", classname=f"evalctl.gate.{check.kind}", name=name)
        if check.status == "regression":
            ET.SubElement(case, "failure", message=check.reason, type="regression").text = check.reason
        elif check.status == "inconclusive":
            ET.SubElement(case, "skipped", message=check.reason)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_summary(result: GateResult) -> str:
    """A pull-request comment: the verdict, what decided it, every check that did not pass, the cliffs, and counts."""
    checks = result.checks
    counts = {s: sum(c.status == s for c in checks) for s in ("pass", "regression", "inconclusive", "warning")}
    against = f" against baseline `{result.baseline}`" if result.baseline else ""
    lines = [
        f"## evalctl gate: {_ICON[result.verdict]} {result.verdict} (exit {result.exit_code})",
        "",
        f"Run `{result.run}`{against}: {counts['pass']} passed, {counts['regression']} regressions, "
        f"{counts['inconclusive']} inconclusive, {counts['warning']} warnings. Policy: {result.policy.metric} accuracy, max drop "
        f"{result.policy.max_accuracy_drop:.3f}, alpha {result.policy.alpha} (Holm across cells), min n {result.policy.min_n}.",
        "",
    ]
    evidence = result.evidence  # what decided the verdict: the deciding checks, their counts, their worst requests
    if evidence is not None and evidence.checks:
        count = len(evidence.checks)
        lines += [f"Decided by {count} {result.verdict} check(s), with the requests that part earliest from their reference:", ""]
        lines += [*(f"{'  ' * depth}- {text}" for depth, text in evidence_lines(evidence)), ""]
    failing = [c for c in checks if c.status != "pass"]
    if failing:
        lines += ["| status | check | cell | reason |", "|---|---|---|---|"]
        lines += [f"| {_ICON[c.status]} {c.status} | {_md_cell(c.name)} | {_md_cell(c.where)} | {_md_cell(c.reason)} |" for c in failing]
        lines.append("")
    if len(result.cliffs):
        lines += ["Cliffs (cache on vs off, by length):", ""]
        lines += [
            f"- {row['profile']}/{row['variant']} pass {row['pass_index']}: {row['column']} from bin {row['bin']} "
            f"(shortest {row['min_tokens']}), drop {row['acc_drop']:.3f}, p_adj {row['p_adjusted']:.2g}"
            for row in result.cliffs.to_dict("records")
        ] + [""]
    return "\n".join(lines)


def write_gate_outputs(result: GateResult, out_dir: Path) -> list[Path]:
    """gate.json, gate-junit.xml and gate-summary.md in `out_dir` (each replaced atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        GATE_FILE: GateDocument.of(result).to_json().encode(),  # typed, versioned: analysis.gate_document
        GATE_JUNIT: junit_xml(result),
        GATE_MARKDOWN: markdown_summary(result).encode(),
    }
    for name, data in files.items():
        write_atomic(out_dir / name, data)
    return [out_dir / name for name in files]
