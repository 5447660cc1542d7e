"""The QDWH weights of the polar SVD (``ops/lapack/_polar.py``): a pure function, checked
against the properties the iteration relies on (Nakatsukasa, Bai and Gygi 2010)."""

from __future__ import annotations

import numpy as np
import pytest

from blasmp_array.ops.lapack._polar import EXTRA_STEPS, MAX_STEPS, _weights


def test_weights_at_one_are_halleys() -> None:
    """At ``l = 1`` the step is Halley's iteration: ``a = 3, b = 1, c = 3``."""
    np.testing.assert_allclose(_weights(1.0), (3.0, 1.0, 3.0), rtol=1e-12)


@pytest.mark.parametrize("low", np.logspace(-16, -0.01, 25))
def test_lower_bound_rises_and_stays_below_one(low: float) -> None:
    """The image ``l (a + b l^2) / (1 + c l^2)`` of the lower bound lies in ``(l, 1]``, and
    the weights satisfy ``c = a + b - 1`` with ``b = (a - 1)^2 / 4``."""
    a, b, c = _weights(low)
    assert np.isclose(c, a + b - 1.0) and np.isclose(b, (a - 1.0) ** 2 / 4.0)
    nxt = low * (a + b * low * low) / (1.0 + c * low * low)
    assert low < nxt <= 1.0 + 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_six_steps_from_eps(dtype) -> None:
    """From ``l_0 = eps`` the bound reaches ``1 - 5 eps`` within six steps (the step count the
    module docstring states), leaving room in ``MAX_STEPS`` for the extra steps."""
    eps = float(np.finfo(dtype).eps)
    low, steps = eps, 0
    while 1.0 - low > 5 * eps:
        a, b, c = _weights(low)
        low = min(1.0, low * (a + b * low * low) / (1.0 + c * low * low))
        steps += 1
        assert steps <= 6
    assert steps + EXTRA_STEPS < MAX_STEPS
