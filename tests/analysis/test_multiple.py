import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalctl.analysis.multiple import holm

pvals = st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=60)


def holm_reference(p):
    """Textbook Holm, written independently with plain loops."""
    m = len(p)
    idx = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, (m - rank) * p[i])
        out[i] = min(1.0, running)
    return out


@settings(max_examples=300, deadline=None)
@given(pvals)
def test_holm_matches_reference(p):
    np.testing.assert_allclose(holm(p), holm_reference(p), rtol=1e-12, atol=1e-15)


@settings(max_examples=300, deadline=None)
@given(pvals)
def test_order_preserved_bounded_and_not_smaller(p):
    raw = np.asarray(p)
    adj = holm(p)
    assert adj.shape == raw.shape
    assert ((adj >= raw - 1e-15) & (adj <= 1.0)).all()
    # Monotone: a smaller raw p never gets a larger adjusted p.
    order = np.argsort(raw, kind="stable")
    assert (np.diff(adj[order]) >= 0).all()


def test_hand_computed():
    p = [0.04, 0.01, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 scaled by 4, 3, 2, 1
    #   -> 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06.
    np.testing.assert_allclose(holm(p), [0.06, 0.03, 0.06, 0.02])
    # Capping at 1.
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]


def test_empty_and_invalid():
    assert holm([]).size == 0
    for bad in ([0.1, float("nan")], [1.2], [-0.1], [[0.1]]):
        with pytest.raises(ValueError):
            holm(bad)
