"""The robust line calibrate.py fits per storage tier (scrtune/study/huber.py): the line
scikit-learn's HuberRegressor gave, where scikit-learn is installed, and a line that outliers
do not bend, where it is not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrtune.study.huber import HUBER_EPSILON, huber_line


def _call_times(seed: int, points: int, outliers: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean call durations by size, as calibrate.py fits them (sizes scaled to [0, 1]): a
    latency plus size over a bandwidth, noise of a few percent, some calls stalled."""
    rng = np.random.default_rng(seed)
    sizes = np.sort(rng.choice(np.arange(1, 1 << 14), size=points, replace=False)) * 4096.0
    scale = sizes.max()
    seconds = 50e-6 + sizes / 2e9
    seconds *= 1 + 0.03 * rng.standard_normal(points)
    stalled = rng.choice(points, size=min(outliers, points), replace=False)
    seconds[stalled] *= rng.uniform(3, 30, size=len(stalled))
    return sizes / scale, seconds


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), points=st.integers(2, 40), outliers=st.integers(0, 4))
def test_the_line_is_the_one_scikit_learns_huber_regressor_fits(seed, points, outliers):
    linear_model = pytest.importorskip(
        "sklearn.linear_model", reason="scikit-learn is not installed (pip install '.[test]')")
    x, y = _call_times(seed, points, outliers)
    theirs = linear_model.HuberRegressor(epsilon=HUBER_EPSILON, alpha=0.0, max_iter=1000)
    theirs.fit(x[:, None], y)
    ours = huber_line(x, y)
    assert ours is not None
    assert ours.slope == pytest.approx(float(theirs.coef_[0]), rel=1e-9, abs=1e-15)
    assert ours.intercept == pytest.approx(float(theirs.intercept_), rel=1e-9, abs=1e-15)
    assert ours.scale == pytest.approx(float(theirs.scale_), rel=1e-9, abs=1e-15)


def test_stalled_calls_bend_the_line_far_less_than_least_squares():
    """Twelve sizes at 50 us + size / 2 GB/s, two of them stalled 20x: least squares takes
    the stalls into the slope, Huber's loss leaves them out."""
    sizes = np.arange(1, 13) * (1 << 20) / (12 << 20)
    seconds = 50e-6 + sizes * (12 << 20) / 2e9
    seconds[[3, 9]] *= 20
    true_slope = (12 << 20) / 2e9
    line = huber_line(sizes, seconds)
    assert line is not None
    least_squares_slope = np.polyfit(sizes, seconds, 1)[0]
    assert abs(line.slope / true_slope - 1) < 0.05
    assert abs(least_squares_slope / true_slope - 1) > 1.0
    assert line.intercept == pytest.approx(50e-6, abs=20e-6)


def test_input_the_solver_cannot_fit_gives_no_line_and_no_exception():
    """calibrate.py skips a tier without a line; a fit must not raise into it."""
    assert huber_line(np.array([0.5, 1.0]), np.array([np.nan, 1.0])) is None
    assert huber_line(np.array([0.5, 1.0]), np.array([np.inf, 1.0])) is None
