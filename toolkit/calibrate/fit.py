"""The fit: cost constants theta from measured programs' feature counts, by regularized robust least squares.

Each program j has simulated cycles ``base_j`` at the current constants
``theta0`` and feature counts ``X_j`` (cycles per unit of each constant), so
its linear prediction is ``base_j + X_j (theta - theta0)``. The fit minimizes
the programs' squared relative errors, Huber-weighted (a program off by more
than ``HUBER`` x the residuals' MAD counts linearly), plus a ridge pull toward
the current values (``REGULARIZATION``: moving a constant by half its value
costs as much as a 1 % error on every program), with every constant kept
non-negative.
"""

from __future__ import annotations

import numpy as np

#: ridge weight per program: a change of half a constant's value costs a 1 % error on every program
REGULARIZATION = (0.01 / 0.5) ** 2
HUBER = 1.345
ITERATIONS = 8


def predict(base: np.ndarray, X: np.ndarray, theta0: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Linear predictions ``base + X (theta - theta0)``."""
    return base + X @ (theta - theta0)


def fit_theta(base: np.ndarray, X: np.ndarray, y: np.ndarray, theta0: np.ndarray, *,
              regularization: float = REGULARIZATION, robust: bool = True) -> np.ndarray:
    """Constants minimizing the Huber-weighted squared relative errors plus the ridge toward ``theta0``
    (all non-negative); ``theta0`` when there is nothing to fit on."""
    from scipy.optimize import lsq_linear
    n, p = X.shape
    if n == 0 or p == 0:
        return theta0.astype(float).copy()
    scale = np.where(theta0 > 0, theta0, 1.0).astype(float)
    A = X * scale / y[:, None]           # in units of each constant's current value: d = (theta - theta0) / scale
    b = (y - base) / y
    lam = np.sqrt(regularization * n)
    w = np.ones(n)
    d = np.zeros(p)
    for _ in range(ITERATIONS if robust else 1):
        sw = np.sqrt(w)
        M = np.vstack([A * sw[:, None], lam * np.eye(p)])
        v = np.concatenate([b * sw, np.zeros(p)])
        d = lsq_linear(M, v, bounds=(-theta0 / scale, np.inf)).x
        r = A @ d - b
        mad = 1.4826 * np.median(np.abs(r - np.median(r)))
        if not robust or mad <= 1e-9:
            break
        c = HUBER * mad
        w = np.where(np.abs(r) <= c, 1.0, c / np.maximum(np.abs(r), 1e-12))
    return theta0 + d * scale


def spearman(a: list[float] | np.ndarray, b: list[float] | np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); nan below three points or without spread."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 3:
        return float("nan")
    from scipy.stats import rankdata
    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])
