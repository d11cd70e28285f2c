"""bundled:tiny-hybrid-gguf (NemotronH: Mamba2 + attention + MLP, written by evalctl) served by llama.cpp.

Its own server: the test is of the model on the engine (it loads, serves, and a cache hit restores the
recurrent state exactly). A recurrent state cannot be trimmed back to a shorter prefix, so each warm
request must find the state of its own prefix's end, the newest the server holds (the probe sends the
prefix alone right before it); otherwise llama.cpp recomputes from token 0 and reports nothing cached.
"""

from __future__ import annotations

import json

import pytest
from conftest import evalctl, only_run

pytestmark = pytest.mark.server
# 12 records (the alias's shots) and the two lengths around llama.cpp's 512-token prefill batch.
POLICY = "max_tokens: 8\n"


def test_probe_passes_on_tiny_hybrid_gguf_every_warm_request_restoring_its_prefix_state(tmp_path, no_orphans):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    out = evalctl("probe", "--model", "tiny-hybrid-gguf", "--policy", str(policy), "--output", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr + out.stdout
    result = json.loads((only_run(tmp_path / "out") / "probe.json").read_text())
    assert result["verdict"] == "pass"
    bins = {b["bin"]: b for b in result["bins"]}
    assert list(bins) == ["12-shot", "chunk-64", "chunk+64"]
    for b in bins.values():
        # The state at the prefix's end restored (a few tokens short where the question re-tokenises the join).
        assert b["prefix_tokens"] - 8 <= b["cached_tokens"] <= b["prefix_tokens"], b
        assert b["mismatch"] == 0.0, b
