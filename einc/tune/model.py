"""The search's surrogate: predicts a schedule's score (higher is faster: -log seconds) from the
space's features, with an uncertainty, and the expected improvement over the best score so far.

Extremely randomized trees (scikit-learn's ExtraTreesRegressor); mean and spread of the per-tree
predictions are the mean and std (SMAC's forest surrogate). Trees take discrete, mixed-range
features as they are (tile sizes, byte counts, flags: no scaling, no kernel to choose), ignore
irrelevant ones, follow cliffs (a tile leaving the cache), and fit 100 x 30 in ~10 ms and predict
thousands of candidates in a few more. Fully grown trees without bootstrap reproduce measured
points (std 0) while their random split thresholds disagree between them (std > 0). A Gaussian
process has smoother uncertainty but O(n^3) fits with a per-fit hyperparameter search and smooth
kernels that fit cliffs and categorical features poorly. `FeasibilityModel`: P(ok) likewise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr

if TYPE_CHECKING:  # scikit-learn is imported when a forest is first fitted (~1 s of imports)
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor


def _matrix(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"features must be a 2-D array (n, d), got shape {X.shape}")
    return X


class CostModel:
    """A regression forest over schedule features: `fit(X, y)` with y higher-is-better, then
    `predict(X)` -> (mean, std) per row."""

    def __init__(self, n_trees: int = 48, seed: int = 0):
        self.n_trees = n_trees
        self.seed = seed
        self._forest: ExtraTreesRegressor | None = None

    @property
    def fitted(self) -> bool:
        return self._forest is not None

    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        X = _matrix(X)
        y = np.asarray(y, dtype=np.float64).ravel()
        if len(X) == 0 or len(y) != len(X):
            raise ValueError(f"fit needs as many targets as feature rows (>= 1): {len(X)} rows, "
                             f"{len(y)} targets")  # fmt: skip
        if not np.all(np.isfinite(y)):
            raise ValueError("fit targets must be finite")
        from sklearn.ensemble import ExtraTreesRegressor

        forest = ExtraTreesRegressor(n_estimators=self.n_trees, bootstrap=False, min_samples_leaf=1,
                                     max_features=1.0, random_state=self.seed, n_jobs=1)  # fmt: skip
        self._forest = forest.fit(X, y)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the trees' predictions, one each per row of X."""
        if self._forest is None:
            raise RuntimeError("CostModel.predict before fit")
        X = _matrix(X)
        if len(X) == 0:
            return np.zeros(0), np.zeros(0)
        # The trees' own predict without its per-call input validation (48 calls per batch):
        # they want C-contiguous float32, which is what the forest converts to anyway.
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        per_tree = np.empty((len(self._forest.estimators_), len(X)))
        for i, tree in enumerate(self._forest.estimators_):
            per_tree[i] = tree.predict(X32, check_input=False)
        return per_tree.mean(axis=0), per_tree.std(axis=0)


class FeasibilityModel:
    """P(a point measures OK) from its features: a classification forest over observed points
    (ok or failed); constant when only one outcome has been seen."""

    def __init__(self, n_trees: int = 24, seed: int = 0):
        self.n_trees = n_trees
        self.seed = seed
        self._forest: ExtraTreesClassifier | None = None
        self._constant = 1.0

    def fit(self, X: np.ndarray, ok: np.ndarray) -> None:
        X = _matrix(X)
        ok = np.asarray(ok, dtype=bool).ravel()
        if len(ok) != len(X):
            raise ValueError(f"fit needs one outcome per feature row: {len(X)} rows, {len(ok)}")
        self._forest = None
        self._constant = float(ok.mean()) if len(ok) else 1.0
        if 0 < ok.sum() < len(ok):
            from sklearn.ensemble import ExtraTreesClassifier

            forest = ExtraTreesClassifier(n_estimators=self.n_trees, bootstrap=False,
                                          random_state=self.seed, n_jobs=1)  # fmt: skip
            self._forest = forest.fit(X, ok)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = _matrix(X)
        if self._forest is None:
            return np.full(len(X), self._constant)
        column = list(self._forest.classes_).index(True)
        proba = np.asarray(self._forest.predict_proba(X))
        return proba[:, column]


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float,
                         xi: float = 0.01) -> np.ndarray:  # fmt: skip
    """E[max(f - best - xi, 0)] for f ~ N(mean, std^2), maximising; std 0 gives the plain
    improvement max(mean - best - xi, 0). `xi` is in the score's units (0.01: 1% faster)."""
    mean = np.asarray(mean, dtype=np.float64)
    std = np.maximum(np.asarray(std, dtype=np.float64), 0.0)
    gain = mean - best - xi
    safe = np.where(std > 0, std, 1.0)
    z = gain / safe
    ei = gain * ndtr(z) + safe * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return np.where(std > 0, np.maximum(ei, 0.0), np.maximum(gain, 0.0))
