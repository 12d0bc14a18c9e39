"""A straight line fitted robustly: Huber's loss, its scale estimated with the line (Owen's
concomitant scale, as scikit-learn's HuberRegressor fits it, unpenalized), minimized by SciPy's
L-BFGS-B from the same start with the same options. The lines are the ones HuberRegressor
gave (tests/test_huber.py compares them where scikit-learn is installed), without its
install or its 1.5 s import for the one fit calibrate.py makes per storage tier."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# HuberRegressor's defaults where calibrate.py kept them: a residual beyond 1.35 scales is an
# outlier (95% efficiency on normal noise); the gradient's tolerance
HUBER_EPSILON = 1.35
GRADIENT_TOLERANCE = 1e-5


@dataclass(frozen=True)
class HuberLine:
    intercept: float
    slope: float
    scale: float  # the residuals' fitted scale: beyond HUBER_EPSILON of it, an outlier


def huber_line(x: np.ndarray, y: np.ndarray, epsilon: float = HUBER_EPSILON,
               max_iter: int = 1000) -> HuberLine | None:
    """y = intercept + slope * x, fitted with Huber's loss; None for fewer than two points or
    any not finite, or where the solver failed (L-BFGS-B's abnormal end, which
    HuberRegressor raises on) or gave no finite line."""
    from scipy import optimize  # here: the CLI's start-up does not pay for SciPy

    features = np.asarray(x, dtype=np.float64).reshape(-1, 1)
    targets = np.asarray(y, dtype=np.float64)
    if len(targets) < 2 or len(targets) != len(features) \
            or not (np.isfinite(features).all() and np.isfinite(targets).all()):
        return None
    start = np.zeros(3)
    start[-1] = 1.0  # the scale starts strictly positive
    bounds = np.tile([-np.inf, np.inf], (3, 1))
    bounds[-1][0] = np.finfo(np.float64).eps * 10  # a scale of 0 leaves the loss undefined
    result = optimize.minimize(_loss_and_gradient, start, method="L-BFGS-B", jac=True,
                               args=(features, targets, epsilon), bounds=bounds,
                               options={"maxiter": max_iter, "gtol": GRADIENT_TOLERANCE})
    slope, intercept, scale = (float(value) for value in result.x)
    if result.status == 2 or not all(np.isfinite([slope, intercept, scale])):
        return None
    return HuberLine(intercept=intercept, slope=slope, scale=scale)


def _loss_and_gradient(params: np.ndarray, features: np.ndarray, targets: np.ndarray,
                       epsilon: float) -> tuple[float, np.ndarray]:
    """Owen's joint loss of a line and a scale sigma, summed over the points: sigma +
    r^2 / sigma inside epsilon * sigma, sigma + 2 epsilon |r| - epsilon^2 sigma beyond; and
    its gradient in (slope, intercept, sigma). The operations are HuberRegressor's, in its
    order, so that the solver takes the same steps."""
    slope, intercept, sigma = params[:1], params[1], params[2]
    residual = targets - features @ slope
    residual -= intercept
    magnitude = np.abs(residual)
    beyond = magnitude > epsilon * sigma
    outliers = magnitude[beyond]
    n_outliers = float(np.count_nonzero(beyond))
    outlier_loss = 2.0 * epsilon * np.sum(outliers) - sigma * n_outliers * epsilon ** 2
    inside = residual[~beyond]
    squared_loss = np.dot(inside.T, inside) / sigma

    gradient = np.zeros(3)
    gradient[:1] = 2.0 / sigma * (inside @ -features[~beyond])
    signs = np.where(residual[beyond] < 0, -1.0, 1.0)
    gradient[:1] -= 2.0 * epsilon * (signs @ features[beyond])
    gradient[2] = len(targets) - n_outliers * epsilon ** 2 - squared_loss / sigma
    gradient[1] = -2.0 * np.sum(inside) / sigma - 2.0 * epsilon * np.sum(signs)
    return len(targets) * sigma + squared_loss + outlier_loss, gradient
