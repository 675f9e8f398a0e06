"""Keras `fit`, `evaluate` and `predict` under the multi-worker strategy.

Stock `MultiWorkerMirroredStrategy` fails Keras 3 `fit` before the first step
(keras-team/keras#20585); under `PreemptiveMultiWorkerMirroredStrategy` two
real workers must train exactly like one process with two replicas.
"""

import os

import numpy as np
import pytest

from tf_preempt import PreemptiveMirroredStrategy
from tf_preempt.testing import cluster

_WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "fit_workers.py")


def _load_workload():
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location("fit_workers", _WORKLOAD)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.slow
def test_fit_two_workers_equals_one_process(logical_cpus, tmp_path):
  scheduler = "pace"
  workload = _load_workload()
  results = cluster.run_workers(f"{_WORKLOAD}:multi_worker", 2,
                                args=(scheduler, str(tmp_path / "cluster")),
                                timeout=240, pin_cpus=True)
  cluster.check_all_ok(results)

  for variant in workload.VARIANTS:
    workdir = tmp_path / f"reference-{variant}"
    workdir.mkdir()
    expected = workload.train(
        PreemptiveMirroredStrategy(list(logical_cpus[:2]),
                                   scheduler=scheduler),
        variant, str(workdir))
    first, second = (r.value[variant] for r in results)
    # Both workers report the very same numbers ...
    assert first == second, variant
    # ... and those of one process with the same two replicas.
    for name, losses in expected["history"].items():
      assert len(first["history"][name]) == len(losses) == 3, name
      np.testing.assert_allclose(first["history"][name], losses, rtol=1e-5,
                                 atol=1e-6, err_msg=f"{variant} {name}")
    for name, value in expected["evaluate"].items():
      np.testing.assert_allclose(first["evaluate"][name], value, rtol=1e-5,
                                 atol=1e-6, err_msg=f"{variant} {name}")
    assert first["predict_shape"] == expected["predict_shape"] == [64, 1]
    np.testing.assert_allclose(first["predict_sorted"],
                               expected["predict_sorted"], rtol=1e-5,
                               atol=1e-6)
    # steps_per_execution=2: callbacks once per block of 2 of the 4 steps.
    assert first["batch_ends"] == expected["batch_ends"] == 2 * 3
    assert first["iterations"] == expected["iterations"] == 4 * 3
    # Fit's train and validation blocks: in the graph on endless data.
    eager = [variant != "xy_endless"] * 2
    assert first["batches_taken_eagerly"] == eager, variant
    assert expected["batches_taken_eagerly"] == eager, variant
    assert first["checkpoints"] == [f"ckpt-{e}.weights.h5" for e in (1, 2, 3)]
  # The same batches taken in the graph train as those taken eagerly.
  by_variant = results[0].value
  for name, values in by_variant["xy"]["history"].items():
    np.testing.assert_allclose(by_variant["xy_endless"]["history"][name],
                               values, rtol=1e-5, atol=1e-6, err_msg=name)
  assert by_variant["xy_endless"]["evaluate"] == pytest.approx(
      by_variant["xy"]["evaluate"], rel=1e-5, abs=1e-6)
