"""The cost of a collective timed alone, refitted with the token bucket."""

import pytest

from tf_preempt.bench import collective_cost
from tf_preempt.testing import bench_records


def test_fit_alone_with_the_token_bucket():
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  cpu = plan_lib.CostModel(1.28e-3, 3.78e-9)
  # transformer_tiny's sizes at 200 Mbit/s: 8 and 32 KB take the fixed
  # cost (their bytes pass in a burst), 128 and 512 KB their bytes' time
  # (the fixed cost hidden): a linear fit is far off in alpha.
  sizes = [8192, 32768, 131072, 524296]
  true = plan_lib.CostModel(1.8e-3, 42e-9)
  seconds = bench_records.repeated_samples(true, 4e-3, cpu, sizes)
  linear = plan_lib.CostModel.fit(sizes, seconds)
  assert linear.alpha < 1e-3
  fitted = collective_cost.fit_alone(sizes, seconds, 4e-3, cpu)
  assert fitted.alpha == pytest.approx(true.alpha, rel=1e-6)
  assert fitted.beta == pytest.approx(true.beta, rel=1e-6)
  # Without CPU cost the burst is instant; a bucket below alpha; noise.
  for burst, cpu_cost in ((4e-3, None), (1e-3, cpu)):
    seconds = bench_records.repeated_samples(true, burst, cpu_cost, sizes)
    fitted = collective_cost.fit_alone(sizes, seconds, burst, cpu_cost)
    assert (fitted.alpha, fitted.beta) == pytest.approx(
        (true.alpha, true.beta), rel=1e-6)
  noisy = [t * (1 + e) for t, e in zip(
      bench_records.repeated_samples(true, 4e-3, cpu, sizes),
      (0.02, -0.01, 0.01, -0.02))]
  fitted = collective_cost.fit_alone(sizes, noisy, 4e-3, cpu)
  assert fitted.alpha == pytest.approx(true.alpha, rel=0.05)
  assert fitted.beta == pytest.approx(true.beta, rel=0.05)
  # Every sample's fixed cost hidden: alpha is not measured, 0 (a lower
  # bound, raised to the measured CPU part by validate).
  big = [50908, 203640, 814568, 3258280]
  hidden = collective_cost.fit_alone(
      big, bench_records.repeated_samples(true, 4e-3, cpu, big), 4e-3, cpu)
  assert hidden.alpha == 0.0
  assert hidden.beta == pytest.approx(true.beta, rel=1e-6)
  # No bucket: the linear fit.
  assert collective_cost.fit_alone(sizes, seconds, 0.0, cpu) == (
      plan_lib.CostModel.fit(sizes, seconds))
  with pytest.raises(ValueError):
    collective_cost.fit_alone([1, 1], [1.0, 2.0], 4e-3)
