"""Tests of CostModel."""

import numpy as np
import pytest

from tf_preempt.plan import CostModel


def test_ring_formula():
  c = CostModel.ring(4, 1e9, 1e-5)
  assert c.alpha == pytest.approx(6e-5)
  assert c.beta == pytest.approx(1.5 / 1e9)
  assert c.seconds(1e9) == pytest.approx(6e-5 + 1.5)
  assert CostModel.ring(1, 1e9, 1e-5).seconds(123) == 0


def test_fit_recovers_parameters():
  x = np.array([1e3, 1e5, 1e6, 4e6])
  c = CostModel.fit(x, 2e-5 + 3e-9 * x)
  assert c.alpha == pytest.approx(2e-5) and c.beta == pytest.approx(3e-9)


def test_fit_needs_two_sizes():
  with pytest.raises(ValueError, match="2 distinct"):
    CostModel.fit([10, 10], [1, 2])


def test_invalid_and_dict_round_trip():
  with pytest.raises(ValueError):
    CostModel(-1, 0)
  with pytest.raises(ValueError):
    CostModel.ring(0, 1e9, 0)
  c = CostModel(1e-5, 2e-9)
  assert CostModel.from_dict(c.to_dict()) == c
  with pytest.raises(ValueError):
    CostModel.from_dict({"alpha": 1})
