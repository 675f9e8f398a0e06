"""The TensorFlow version check and the plan-agreement comparison."""

import re

import numpy as np
import pytest

from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.runtime import agreement
from tf_preempt.runtime import tf_internals


@pytest.mark.parametrize("version", ["2.21.0", "2.21.3", "2.21.0rc1"])
def test_supported_tf_versions(version):
  assert tf_internals.check_tf_version(version) == "2.21"


@pytest.mark.parametrize("version", ["2.20.1", "2.22.0", "3.0.0", "2.2.10",
                                     "garbage"])
def test_unsupported_tf_version_is_a_clear_error(version):
  expected = rf"2\.21\.x.*TensorFlow {re.escape(version)} is installed"
  with pytest.raises(tf_internals.UnsupportedTensorFlowError, match=expected):
    tf_internals.check_tf_version(version)


def _plan(split):
  tensors = [PlanTensor("a", 64), PlanTensor("b", 32)]
  groups = ([[(1, 0, 32)], [(0, 0, 32)], [(0, 32, 32)]] if split else
            [[(1, 0, 32)], [(0, 0, 64)]])
  return plan_from_groups(tensors, groups)


def test_agreeing_workers_pass():
  plan = _plan(False)
  agreement.check_signatures([agreement.signature(plan, w) for w in range(3)])


def test_mismatch_names_workers_and_first_field():
  rows = [agreement.signature(_plan(False), 0),
          agreement.signature(_plan(False), 1),
          agreement.signature(_plan(True), 2)]
  with pytest.raises(agreement.PlanMismatchError,
                     match=r"workers 0 and 2 .*'num_collectives' \(2 vs 3\)"):
    agreement.check_signatures(rows)


def test_signature_is_fixed_length_int32():
  for plan in (_plan(False), _plan(True)):
    sig = agreement.signature(plan, 5)
    assert sig.dtype == np.int32 and sig.shape == (agreement.SIGNATURE_LENGTH,)


def test_split_plans_are_refused_before_anything_runs(logical_cpus):
  # A reduce-scatter/all-gather plan is simulation only: lowered to
  # all-reduces it would reduce the wrong bytes.
  from tf_preempt.plan import TrainingDAG  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import CostModel  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import make_plan  # pylint: disable=g-import-not-at-top
  from tf_preempt.runtime import PreemptiveAllReduce  # pylint: disable=g-import-not-at-top
  from tf_preempt.strategies import PreemptiveMirroredStrategy  # pylint: disable=g-import-not-at-top
  dag = TrainingDAG.chain([1e-3] * 3, [2e-3] * 3, [4096] * 3)
  split = make_plan(dag, CostModel(1e-4, 1e-8), "pace_rsag")
  assert not split.is_all_reduce
  devices = list(logical_cpus[:2])
  with pytest.raises(ValueError, match="all-reduce plans only"):
    PreemptiveMirroredStrategy(devices, plan=split)
  with pytest.raises(ValueError, match="all-reduce plans only"):
    PreemptiveAllReduce(devices, plan=split)
  ops_ = PreemptiveAllReduce(devices)
  with pytest.raises(ValueError, match="all-reduce plans only"):
    ops_.set_plan(split)
