"""Tests of tf_preempt.bench.step_phases: a block's phases in a profile."""

import pytest

from tf_preempt.bench import block_head
from tf_preempt.bench import step_phases
from tf_preempt.testing.profiles import fake_profile

_LOSS = ("compile_loss/sparse_categorical_crossentropy/x:" +
         block_head.LOSS_OP_TYPE)


def _two_step_block(start):
  """The ops of a K = 2 block starting at `start` ms, as the unrolled
  function names them."""
  return [
      ("model_3/dropout/stateless_dropout:Mul", start + 1, start + 3),
      ("model_1/embedding/GatherV2:GatherV2", start + 3, start + 4),
      (_LOSS, start + 9, start + 10),
      ("gradient_tape/model_1/dense/MatMul:MatMul", start + 10, start + 16),
      ("sgd/update_0/AssignAddVariableOp:AssignAddVariableOp", start + 20,
       start + 21),
      ("sgd/update_0/Mul:Mul", start + 19, start + 22),
      # Another variable's update, uniquified: not the first variable's.
      ("sgd/update_0_1/Mul:Mul", start + 23, start + 25),
      ("compile_loss_1/sparse_categorical_crossentropy/x:" +
       block_head.LOSS_OP_TYPE, start + 26, start + 27),
      ("gradient_tape/model_3/dense/MatMul:MatMul", start + 27, start + 31),
      ("sgd_1/update_0/Mul:Mul", start + 33, start + 34)]


def test_phases_of_unrolled_blocks():
  space = fake_profile(calls=[(0, 40), (100, 138)],
                       ops=_two_step_block(0) + _two_step_block(100))
  phases = step_phases.block_phases(space, 2)
  assert [p["head_ms"] for p in phases] == pytest.approx([10.0, 10.0])
  assert [p["compute_ms"] for p in phases] == pytest.approx([31.0, 31.0])
  # The first variable's update ends at 22, the second loss at 27.
  assert [p["later_forward_ms"] for p in phases] == [pytest.approx([5.0])] * 2
  assert [p["block_ms"] for p in phases] == pytest.approx([40.0, 38.0])


def test_phases_of_stock_keras_s_one_step_function():
  prefix = "StatefulPartitionedCall/"
  space = fake_profile(
      calls=[(0, 30)],
      ops=[(prefix + _LOSS, 8, 9),
           (prefix + "gradient_tape/compile_loss/x:Mul", 9, 10),
           (prefix + "gradient_tape/model_1/dense/MatMul:MatMul", 10, 15),
           (prefix + "sgd/update_0/Mul:Mul", 20, 21)])
  (phase,) = step_phases.block_phases(space, 1)
  assert phase.pop("later_forward_ms") == []
  assert phase == pytest.approx({"head_ms": 9.0, "compute_ms": 15.0,
                                 "block_ms": 30.0})


def test_phases_under_a_function_s_prefix():
  prefix = "StatefulPartitionedCall/"
  ops = [(prefix + n, s, e) for n, s, e in _two_step_block(0)]
  (phase,) = step_phases.block_phases(fake_profile([(0, 40)], ops), 2)
  assert phase["head_ms"] == pytest.approx(10.0)
  assert phase["later_forward_ms"] == [pytest.approx(5.0)]
  # "xsgd/" is another scope, not the optimizer's.
  ops = [(n.replace("sgd/update_0/", "xsgd/update_0/"), s, e)
         for n, s, e in _two_step_block(0)]
  with pytest.raises(ValueError, match="no update of the first variable"):
    step_phases.block_phases(fake_profile([(0, 40)], ops), 2)


def test_a_block_of_other_steps_or_without_the_update_is_refused():
  space = fake_profile(calls=[(0, 40)], ops=_two_step_block(0))
  with pytest.raises(ValueError, match="ran 2 loss ops, not 1"):
    step_phases.block_phases(space, 1)
  ops = [o for o in _two_step_block(0) if not o[0].startswith("sgd/update_0/")]
  with pytest.raises(ValueError, match="step 1's loss has no update of the "
                     "first variable"):
    step_phases.block_phases(fake_profile([(0, 40)], ops), 2)
  # A call without a loss (e.g. the logs' reduction) is no block.
  assert step_phases.block_phases(
      fake_profile([(0, 5)], [("x:Add", 1, 2)]), 2) == []
