"""Speculative decoding as a llama.cpp profile setting: typed in the config, passed to the launcher."""

from __future__ import annotations

import pytest
from conftest import profile_of
from pydantic import ValidationError

from evalctl.schema import CacheMode
from evalctl.servers.registry import adapter_for

MODEL = "bundled:smollm2-135m"


def argv(**speculative) -> list[str]:
    profile = profile_of({"name": "p", "engine": {"name": "llamacpp", **speculative}, "model_path": MODEL})
    return adapter_for(profile.engine.name).engine_argv("python", profile, CacheMode.on, 8080, "/w")


def test_each_kind_reaches_the_launcher_by_its_xllamacpp_name(monkeypatch):
    monkeypatch.setattr("evalctl.servers.engines.llamacpp.resolve_model_path", lambda path: f"resolved:{path}")
    assert "--speculative" not in argv()
    plain = argv(speculative={"kind": "ngram-simple"})
    assert plain[plain.index("--speculative") :] == ["--speculative", "ngram_simple"]
    draft = argv(speculative={"kind": "draft", "draft_model": MODEL})
    assert draft[draft.index("--speculative") :] == ["--speculative", "draft_simple", "--draft-model", f"resolved:{MODEL}"]


@pytest.mark.parametrize("speculative", [{"kind": "draft"}, {"kind": "ngram-mod", "draft_model": MODEL}, {"kind": "medusa"}])
def test_a_bad_speculation_is_refused_when_the_config_is_read(speculative):
    with pytest.raises(ValidationError, match="speculative"):
        profile_of({"name": "p", "engine": {"name": "llamacpp", "speculative": speculative}, "model_path": MODEL})
