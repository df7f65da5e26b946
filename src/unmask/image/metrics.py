"""Image metrics on a classifier's outputs: Frechet distance of penultimate features (FID),
an Inception-Score-style score of its softmax, class accuracy; bootstrap standard errors.

FID (Heusel et al. 2017, arXiv 1706.08500): ||mu_a - mu_b||^2 + tr(S_a + S_b - 2 (S_a S_b)^{1/2}).
Here the features are those of :class:`~unmask.image.classifier.DigitClassifier`, not
Inception-v3, so the values are on this task's own scale.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from unmask.errors import require


def _sqrtm_psd(s: np.ndarray) -> np.ndarray:
    """Symmetric square root of a symmetric positive semi-definite matrix (eigh; eigenvalues
    below 0 from rounding are clipped)."""
    w, v = np.linalg.eigh((s + s.T) / 2)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance(mu_a: np.ndarray, cov_a: np.ndarray, mu_b: np.ndarray,
                     cov_b: np.ndarray) -> float:
    """Frechet distance between Gaussians N(mu_a, cov_a) and N(mu_b, cov_b), float64.

    tr (S_a S_b)^{1/2} is computed as the sum of square roots of the eigenvalues of the
    symmetric PSD matrix S_a^{1/2} S_b S_a^{1/2} (same spectrum as S_a S_b), so no complex
    parts or non-symmetric square roots arise; the result is clipped at 0.
    """
    mu_a, mu_b = np.asarray(mu_a, np.float64), np.asarray(mu_b, np.float64)
    cov_a, cov_b = np.asarray(cov_a, np.float64), np.asarray(cov_b, np.float64)
    root_a = _sqrtm_psd(cov_a)
    middle = root_a @ cov_b @ root_a
    eig = np.linalg.eigvalsh((middle + middle.T) / 2)
    cross = float(np.sqrt(np.clip(eig, 0.0, None)).sum())
    d = float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * cross)
    return max(d, 0.0)


def gaussian_stats(features: torch.Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (F,), covariance (F, F)) of features (M, F), float64, M >= 2."""
    x = np.asarray(features, np.float64)
    require(x.ndim == 2 and len(x) >= 2, f"features: need (M >= 2, F), got {x.shape}")
    return x.mean(0), np.cov(x, rowvar=False)


def fid(features_a: torch.Tensor | np.ndarray, features_b: torch.Tensor | np.ndarray) -> float:
    """Frechet distance between two feature sets (M_a, F) and (M_b, F)."""
    return frechet_distance(*gaussian_stats(features_a), *gaussian_stats(features_b))


def inception_score(probs: torch.Tensor | np.ndarray) -> float:
    """exp(E_x KL(p(y|x) || p(y))) of class probabilities (M, C): in [1, C]; high when each
    sample is confidently one class and the classes are used evenly."""
    p = np.asarray(probs, np.float64)
    marginal = p.mean(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(p > 0, p * (np.log(p) - np.log(marginal)), 0.0).sum(1)
    return float(np.exp(kl.mean()))


def class_accuracy(probs: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray
                   ) -> float:
    """Share of samples whose most probable class (M, C) is the class asked for (M,)."""
    return float((np.asarray(probs).argmax(1) == np.asarray(labels)).mean())


def bootstrap_se(statistic: Callable[[np.ndarray], float], n: int, *, rounds: int = 200,
                 seed: int = 0) -> float:
    """Standard deviation of ``statistic(indices)`` over ``rounds`` resamples (with
    replacement) of ``n`` indices: the bootstrap standard error of a statistic of n items."""
    require(n >= 2, f"n: need >= 2 items to bootstrap, got {n}")
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, n)) for _ in range(rounds)]
    return float(np.std(values, ddof=1))


def paired_fid_difference(features_a: torch.Tensor | np.ndarray,
                          features_b: torch.Tensor | np.ndarray,
                          reference: tuple[np.ndarray, np.ndarray], *, rounds: int = 200,
                          seed: int = 0) -> tuple[float, float]:
    """FID(a) - FID(b) against ``reference`` (mean, covariance) and its bootstrap standard
    error, each resample drawing the same indices from both feature sets (M, F): sample i of
    ``a`` and of ``b`` answer the same prompt, so the error of the difference is paired and
    smaller than the two FIDs' errors suggest."""
    a, b = (np.asarray(t, np.float64) for t in (features_a, features_b))
    require(a.shape == b.shape, f"features: expected equal shapes, got {a.shape} and {b.shape}")

    def diff(idx):
        return (frechet_distance(*gaussian_stats(a[idx]), *reference)
                - frechet_distance(*gaussian_stats(b[idx]), *reference))

    return diff(np.arange(len(a))), bootstrap_se(diff, len(a), rounds=rounds, seed=seed)


def sample_metrics(features: torch.Tensor, probs: torch.Tensor, labels: torch.Tensor,
                   reference: tuple[np.ndarray, np.ndarray], *, rounds: int = 200,
                   seed: int = 0) -> dict:
    """FID against ``reference`` (mean, covariance), IS-style score and class accuracy of
    samples (features (M, F), probs (M, C), asked classes (M,)), each with its bootstrap
    standard error over the samples (the reference held fixed)."""
    f, p, y = (np.asarray(t, np.float64) for t in (features, probs, labels))
    n = len(f)

    def fid_of(idx):
        return frechet_distance(*gaussian_stats(f[idx]), *reference)

    return {
        "fid": fid_of(np.arange(n)), "fid_se": bootstrap_se(fid_of, n, rounds=rounds, seed=seed),
        "inception_score": inception_score(p),
        "inception_score_se": bootstrap_se(lambda i: inception_score(p[i]), n, rounds=rounds,
                                           seed=seed),
        "class_accuracy": class_accuracy(p, y),
        "class_accuracy_se": bootstrap_se(lambda i: class_accuracy(p[i], y[i]), n,
                                          rounds=rounds, seed=seed),
    }
