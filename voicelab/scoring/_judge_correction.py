"""A judge's pass rate corrected for its measured error (Rogan-Gladen), with a bootstrap interval.

Rogan & Gladen (1978), *Estimating prevalence from the results of a screening test*, Am. J.
Epidemiol. 107:71-76: with the judge's sensitivity (P(judge pass | human pass)) and specificity
(P(judge fail | human fail)) measured on labeled items, the true pass rate behind an observed
judge pass rate p is ``(p + spec - 1) / (sens + spec - 1)``, clipped to [0, 1]; undefined when
``sens + spec <= 1`` (a judge no better than chance).

The interval is a seeded percentile bootstrap over *both* samples: each replicate draws the
judged pass count (binomial) and, independently, the calibration's confusion counts
(multinomial: the labeled pairs resampled with replacement), so it carries the uncertainty of
the measured error as well as the sampling error of the judged rate. Replicates where the
resampled judge is no better than chance have no corrected rate and are left out (``note``
counts them). numpy only: the run report computes it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

METHOD = "rogan-gladen; percentile bootstrap over judged and calibration samples"


@dataclass(frozen=True)
class CorrectedRate:
    observed: float
    corrected: float
    low: float
    high: float
    sensitivity: float
    specificity: float
    n_judged: int
    n_calibration: int
    confidence: float
    n_bootstrap: int
    seed: int
    undefined_replicates: int = 0
    method: str = METHOD

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def safe_ratio(numerator: ArrayLike, denominator: ArrayLike) -> NDArray[np.float64]:
    """numerator / denominator elementwise, NaN where the denominator is not positive."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1),
                        np.nan)


def rogan_gladen(observed_pass_rate: object, *, sensitivity: object, specificity: object) -> Any:
    """True pass rate from an observed one and the judge's error, clipped to [0, 1]; NaN where
    sensitivity + specificity <= 1."""
    youden = np.asarray(sensitivity, dtype=float) + np.asarray(specificity, dtype=float) - 1.0
    corrected = safe_ratio(np.asarray(observed_pass_rate, dtype=float) + specificity - 1.0,
                       np.where(youden > 0, youden, np.nan))
    clipped = np.clip(corrected, 0.0, 1.0)
    return float(clipped) if np.ndim(clipped) == 0 else clipped


def corrected_rate(judged_passed: int, judged: int, *, tp: int, fn: int, fp: int, tn: int,
                   confidence: float = 0.95, n_bootstrap: int = 2000, seed: int = 0
                   ) -> CorrectedRate:
    """The Rogan-Gladen rate of ``judged_passed`` judge passes out of ``judged`` verdicts, from
    the judge's confusion counts against human labels (positive class: pass)."""
    for name, value in (("judged_passed", judged_passed), ("judged", judged), ("tp", tp),
                        ("fn", fn), ("fp", fp), ("tn", tn), ("n_bootstrap", n_bootstrap)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if judged_passed > judged:
        raise ValueError(f"judged_passed ({judged_passed}) cannot exceed judged ({judged})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    sensitivity = float(safe_ratio(tp, tp + fn))
    specificity = float(safe_ratio(tn, tn + fp))
    observed = float(safe_ratio(judged_passed, judged))
    corrected = rogan_gladen(observed, sensitivity=sensitivity, specificity=specificity)
    n_calibration = tp + fn + fp + tn
    low = high = math.nan
    undefined = 0
    if judged and n_calibration and n_bootstrap:
        rng = np.random.default_rng(seed)
        observed_b = rng.binomial(judged, observed, size=n_bootstrap) / judged
        counts = rng.multinomial(n_calibration, np.array([tp, fn, fp, tn]) / n_calibration,
                                 size=n_bootstrap)
        tp_b, fn_b, fp_b, tn_b = counts.T
        replicates = rogan_gladen(observed_b, sensitivity=safe_ratio(tp_b, tp_b + fn_b),
                                  specificity=safe_ratio(tn_b, tn_b + fp_b))
        finite = replicates[np.isfinite(replicates)]
        undefined = int(n_bootstrap - finite.size)
        if finite.size:
            tail = (1.0 - confidence) / 2.0 * 100.0
            low, high = (float(v) for v in np.percentile(finite, [tail, 100.0 - tail]))
    return CorrectedRate(observed=observed, corrected=float(corrected), low=low, high=high,
                         sensitivity=sensitivity, specificity=specificity, n_judged=int(judged),
                         n_calibration=int(n_calibration), confidence=float(confidence),
                         n_bootstrap=int(n_bootstrap), seed=int(seed),
                         undefined_replicates=undefined)
