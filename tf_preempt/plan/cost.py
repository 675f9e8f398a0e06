"""The alpha-beta cost model of one all-reduce.

A collective moving `s` bytes takes `alpha + beta * s` seconds: `alpha` is the
fixed start-up cost (latency, kernel launch, negotiation), `beta` the time per
byte. For a ring all-reduce over n workers every byte crosses 2(n-1)/n links
and the ring makes 2(n-1) latency-bound steps.
"""

import dataclasses
import math
from typing import Dict, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class CostModel:
  """Seconds of one collective as a linear function of its size.

  Attributes:
    alpha: seconds per collective, >= 0.
    beta: seconds per byte, >= 0.
  """
  alpha: float
  beta: float

  def __post_init__(self):
    for name in ("alpha", "beta"):
      v = getattr(self, name)
      if not isinstance(v, (int, float, np.floating, np.integer)) or (
          not math.isfinite(v) or v < 0):
        raise ValueError(f"CostModel.{name}={v!r} must be finite and >= 0.")
    object.__setattr__(self, "alpha", float(self.alpha))
    object.__setattr__(self, "beta", float(self.beta))

  def seconds(self, nbytes):
    """Duration of a collective of `nbytes` bytes (scalar or array)."""
    return self.alpha + self.beta * nbytes

  def phase(self) -> "CostModel":
    """One phase of a split all-reduce: a reduce-scatter or an all-gather.

    A ring all-reduce is a reduce-scatter then an all-gather, each of n-1
    steps moving (n-1)/n of the bytes over every link, so each phase costs
    half of both terms. For a fitted model this is an assumption: an
    implementation with a fixed per-launch overhead pays it in both phases,
    which this halving does not charge (see benchmarks/simulation/README.md).
    """
    return CostModel(alpha=self.alpha / 2, beta=self.beta / 2)

  @classmethod
  def ring(cls, num_workers: int, bandwidth_bytes_per_s: float,
           latency_s: float) -> "CostModel":
    """The cost of a ring all-reduce.

    Args:
      num_workers: n >= 1 (one worker costs nothing).
      bandwidth_bytes_per_s: link bandwidth, > 0.
      latency_s: per-step latency, >= 0.

    Returns:
      CostModel(alpha=2(n-1)*latency, beta=2(n-1)/n/bandwidth).

    Raises:
      ValueError: on a non-positive worker count or bandwidth.
    """
    if num_workers < 1:
      raise ValueError(f"num_workers={num_workers} must be >= 1.")
    if not bandwidth_bytes_per_s > 0:
      raise ValueError(f"bandwidth_bytes_per_s={bandwidth_bytes_per_s} must "
                       "be > 0.")
    n = num_workers
    return cls(alpha=2 * (n - 1) * latency_s,
               beta=2 * (n - 1) / n / bandwidth_bytes_per_s)

  @classmethod
  def fit(cls, nbytes: Sequence[float], seconds: Sequence[float]
          ) -> "CostModel":
    """Least-squares fit of measured collective durations.

    Negative estimates (noise) are clipped to 0.

    Args:
      nbytes: sizes of the measured collectives.
      seconds: their durations.

    Returns:
      The fitted model.

    Raises:
      ValueError: on mismatched lengths or fewer than 2 distinct sizes.
    """
    x = np.asarray(nbytes, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
      raise ValueError("fit: nbytes and seconds must be 1-D and of equal "
                       "length.")
    if len(np.unique(x)) < 2:
      raise ValueError("fit: need measurements at >= 2 distinct sizes, got "
                       f"{len(np.unique(x))}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
      raise ValueError("fit: measurements must be finite.")
    a = np.stack([np.ones_like(x), x], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, y, rcond=None)
    return cls(alpha=max(0.0, float(alpha)), beta=max(0.0, float(beta)))

  def to_dict(self) -> Dict[str, float]:
    return {"alpha": self.alpha, "beta": self.beta}

  @classmethod
  def from_dict(cls, data: Dict[str, float]) -> "CostModel":
    """Rebuilds from `to_dict`'s output.

    Raises:
      ValueError: on missing or invalid fields.
    """
    try:
      return cls(alpha=float(data["alpha"]), beta=float(data["beta"]))
    except (KeyError, TypeError) as e:
      raise ValueError(f"Not a valid CostModel: {e}") from e
