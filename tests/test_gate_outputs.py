from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from evalctl.analysis.evidence import DecidingCheck, Evidence, PartedRequest
from evalctl.analysis.gate import Check, GatePolicy, GateResult
from evalctl.analysis.gate_document import GATE_SCHEMA_VERSION, GateDocument, GateFileError, read_gate
from evalctl.errors import ExitCode
from evalctl.manifest import Manifest
from evalctl.report.gate_outputs import junit_xml, markdown_summary, write_gate_outputs
from evalctl.runs import Run

NASTY = 'answer <"42"> & ]]> | pipe'


def result() -> GateResult:
    checks = [
        Check("cache on vs off", "accuracy", "regression", NASTY, profile="p", variant="v", cache="on", shots=16,
              concurrency=4, pass_index=1, value=0.15, threshold=0.03, p_value=1e-9, p_adjusted=float("nan"), b=30, c=0, n=200),
        Check("run complete", "completeness", "inconclusive", "incomplete: status 'interrupted'"),
        Check("error rate", "error_rate", "pass", "0 of 200 requests failed", value=0.0, threshold=0.02, n=200),
    ]  # fmt: skip
    return GateResult("regression", GatePolicy(), "run-1", None, checks, pd.DataFrame())


def test_junit_escapes_and_maps_statuses():
    root = ET.fromstring(junit_xml(result()))
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    failure, skipped, passed = suite.findall("testcase")
    assert failure.find("failure").get("message") == NASTY and failure.find("failure").text == NASTY
    assert failure.get("name") == "cache on vs off [p/v cache=on shots=16 conc=4 pass=1]"
    assert skipped.find("skipped") is not None and passed.find("failure") is None and passed.find("skipped") is None


def test_gate_json_is_strict_json_with_nulls_for_missing_numbers(tmp_path):
    write_gate_outputs(result(), tmp_path)
    doc = json.loads((tmp_path / "gate.json").read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["schema_version"] == GATE_SCHEMA_VERSION
    read = read_gate(tmp_path)
    assert read == GateDocument.of(result()) and read.checks == [Check(**c.as_dict()) for c in result().checks]  # read back as written
    assert doc["checks"][0]["p_adjusted"] is None and doc["checks"][0]["b"] == 30
    assert doc["policy"]["max_accuracy_drop"] == 0.03


def test_markdown_lists_what_did_not_pass_and_escapes_pipes():
    text = markdown_summary(result())
    assert text.startswith("## evalctl gate: ❌ regression (exit 1)")
    assert "pipe" in text and "\\| pipe" in text
    assert "error rate" not in text  # passing checks are counted, not listed
    assert "1 passed, 1 regressions, 1 inconclusive" in text


def test_chunked_prefill_size_read_defensively():
    def size(config: dict) -> int | None:
        return Run(Path("r"), Manifest(run_id="r", config=config)).chunked_prefill_size

    sglang = {"name": "sglang", "chunked_prefill_size": 8192}
    assert size({"servers": [{"name": "a", "engine": "llamacpp"}, {"name": "b", "engine": sglang}]}) == 8192
    assert size({"servers": [{"name": "a", "engine": {**sglang, "chunked_prefill_size": None}}]}) is None
    assert size({}) is None


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("{not json", "is not JSON"),
        ('{"verdict": "maybe", "exit_code": 0, "policy": {}, "run": "r"}', "is not a gate document: verdict"),
        ('{"schema_version": 99, "verdict": "pass", "exit_code": 0, "policy": {}, "run": "r"}', "newer than this evalctl reads"),
        ('{"verdict": "pass", "exit_code": 0, "policy": {"alpha": "often"}, "run": "r"}', "policy.alpha"),
    ],
)
def test_a_bad_gate_json_is_refused_by_every_reader_with_what_is_wrong(tmp_path, text, told):
    (tmp_path / "gate.json").write_text(text)
    with pytest.raises(GateFileError, match=told) as caught:
        read_gate(tmp_path)
    assert caught.value.exit_status == ExitCode.BAD_INPUT and str(tmp_path / "gate.json") in str(caught.value)


def test_a_gate_json_from_before_the_schema_version_reads_as_version_1(tmp_path):
    write_gate_outputs(result(), tmp_path)
    doc = json.loads((tmp_path / "gate.json").read_text())
    del doc["schema_version"]
    doc["policy"]["dropped_since"] = 1  # a policy field an older evalctl wrote
    (tmp_path / "gate.json").write_text(json.dumps(doc))
    assert read_gate(tmp_path) == GateDocument.of(result())


def with_evidence() -> GateResult:
    """result() with the evidence its verdict rests on: the regressed cell's counts and its earliest-parting request."""
    first = result().checks[0]
    worst = [PartedRequest(doc_id=7, prompt_tokens=1205, cached_tokens=1145, first_difference=0, turn_kind="rewind")]
    decided = DecidingCheck(first.name, first.kind, first.where, "cache on vs off", first.b, first.c, first.n, worst)
    return replace(result(), evidence=Evidence("regression", [decided]))


def test_gate_json_keeps_the_evidence_typed_and_a_file_without_it_reads_with_none(tmp_path):
    write_gate_outputs(with_evidence(), tmp_path)
    doc = json.loads((tmp_path / "gate.json").read_text())
    assert doc["evidence"]["position_unit"] == "characters"
    assert doc["evidence"]["checks"][0]["worst"][0] == {
        "doc_id": 7, "prompt_tokens": 1205, "cached_tokens": 1145, "first_difference": 0, "turn_kind": "rewind"
    }  # fmt: skip
    assert read_gate(tmp_path).evidence == with_evidence().evidence
    del doc["evidence"]  # written before the field
    (tmp_path / "gate.json").write_text(json.dumps(doc))
    assert read_gate(tmp_path).evidence is None


def test_markdown_names_the_deciding_checks_with_their_counts_and_worst_requests():
    text = markdown_summary(with_evidence())
    assert "Decided by 1 regression check(s)" in text
    assert "- cache on vs off [p/v cache=on shots=16 conc=4 pass=1]: b 30, c 0, n 200\n" in text
    assert "  - doc 7 (rewind): parts at character 0; 1205 prompt, 1145 cached tokens\n" in text
    assert "Decided by" not in markdown_summary(result())  # a result without evidence (an older one) shows none
