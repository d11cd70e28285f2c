"""The llama.cpp launcher sets only the fields a build has (servers.llamacpp_main), on the installed
xllamacpp and on the field layout of the releases before the `hostname` -> `hostnames` rename."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evalctl.servers.llamacpp_main import apply, llama_cpp_build

xllamacpp = pytest.importorskip("xllamacpp")


def test_installed_build_takes_dotted_fields_and_lists_the_ones_it_lacks():
    params = xllamacpp.CommonParams()
    renamed, unset = apply(
        params, {"model.path": "m.gguf", "cpuparams.n_threads": 3, "n_parallel": 2, "no_such_field": 1, "nope.deeper": 2}
    )
    assert (params.model.path, params.cpuparams.n_threads, params.n_parallel) == ("m.gguf", 3, 2)
    assert set(unset) == {"no_such_field", "nope.deeper"}
    assert renamed == {}


def test_a_release_before_the_rename_gets_its_one_address_under_the_old_name():
    # The layout of xllamacpp 0.2.13 to 2026.9.11063: `hostname` (one address), `webui`, no `hostnames`.
    params = SimpleNamespace(hostname="0.0.0.0", webui=True, model=SimpleNamespace(path=""))
    renamed, unset = apply(params, {"hostnames": ["127.0.0.1"], "ui": False, "model.path": "m.gguf", "checkpoint_min_step": 64})
    assert (params.hostname, params.webui, params.model.path) == ("127.0.0.1", False, "m.gguf")
    assert renamed == {"hostnames": "hostname", "ui": "webui"}
    assert unset == {"checkpoint_min_step": "no such field in this build"}
    with pytest.raises(ValueError, match="binds one address"):
        apply(params, {"hostnames": ["127.0.0.1", "::1"]})


def test_a_newer_build_takes_an_older_name_too():
    params = SimpleNamespace(hostnames=["0.0.0.0"])
    assert apply(params, {"hostname": "127.0.0.1"}) == ({"hostname": "hostnames"}, {})
    assert params.hostnames == ["127.0.0.1"]


@pytest.mark.parametrize(
    ("version", "build_info", "build"),
    [
        ("0.2.13", {"build_number": 8352}, 8352),  # before year versions: the wheel's own build info
        ("2026.5.9294", {"build_number": 0}, 9294),  # year versions report 0: the version's third part
        ("2026.4.8672.1", {}, 8672),  # a re-release of the same build
        ("0.2.7", {}, None),
    ],
)
def test_the_vendored_llama_cpp_build(version, build_info, build):
    assert llama_cpp_build(version, build_info) == build


def test_speculation_asked_for_is_set_or_refused_never_dropped():
    from argparse import Namespace

    from evalctl.servers.llamacpp_main import _speculation

    asked = _speculation(xllamacpp, Namespace(speculative="draft_simple", draft_model="d.gguf"), "now")
    params = xllamacpp.CommonParams()
    assert apply(params, asked) == ({}, {})
    assert params.speculative.types == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    assert params.speculative.draft.mparams.path == "d.gguf"
    assert _speculation(xllamacpp, Namespace(speculative=None, draft_model=None), "now") == {}
    # A build without the type (or without speculation at all) cannot serve that arm: the launcher exits saying so.
    with pytest.raises(SystemExit, match="no speculative decoding of type ngram_mod"):
        _speculation(SimpleNamespace(), Namespace(speculative="ngram_mod", draft_model=None), "0.2.13")
