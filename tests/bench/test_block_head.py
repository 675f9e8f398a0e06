"""Tests of tf_preempt.bench.block_head: a block's head in a profile."""

import pytest

from tf_preempt.bench import block_head
from tf_preempt.testing.profiles import fake_profile as _space

_LOSS = "compile_loss/sparse/SparseSoftmaxCrossEntropyWithLogits:" + (
    block_head.LOSS_OP_TYPE)
_GRAD = "gradient_tape/compile_loss/x:" + block_head.LOSS_OP_TYPE


def test_a_head_ends_with_the_block_s_first_loss():
  space = _space(
      calls=[(0, 40), (50, 60), (100, 140)],
      ops=[("model/dense/MatMul:MatMul", 1, 5), (_LOSS, 8, 12),
           (_GRAD, 12, 13), ("compile_loss_1/" + _LOSS, 25, 30),
           ("iterator:IteratorGetNext", 51, 52),  # a call without a step
           (_LOSS, 120, 127), (_LOSS, 110, 115)])
  assert block_head.block_heads(space, 2) == [
      pytest.approx((0.012, 0.040)), pytest.approx((0.015, 0.040))]


def test_only_the_program_s_calls_and_the_executor_s_ops_count():
  space = _space(calls=[(0, 40), (5, 30)],  # the second nested
                 ops=[(_LOSS, 8, 12), ("EagerKernelExecute", 50, 90),
                      (_LOSS, 60, 62)],  # in no call of the program
                 # A loss op's name on the program's thread is no op that
                 # ran.
                 program_ops=[(_LOSS, 1, 2)])
  assert block_head.block_heads(space, 1) == [pytest.approx((0.012, 0.04))]


def test_a_call_of_another_number_of_steps_is_refused():
  space = _space(calls=[(0, 40)], ops=[(_LOSS, 8, 12), (_GRAD, 12, 30)])
  assert block_head.block_heads(space, 1) == [pytest.approx((0.012, 0.04))]
  with pytest.raises(ValueError, match="ran 1 loss ops, not 2"):
    block_head.block_heads(space, 2)


def test_a_profile_without_the_host_or_its_calls_is_refused():
  with pytest.raises(ValueError, match="no /host:CPU plane"):
    block_head.block_heads(_space([(0, 1)], [], plane_name="/device:0"), 1)
  with pytest.raises(ValueError, match="no eager call"):
    block_head.block_heads(_space([], [(_LOSS, 8, 12)]), 1)


@pytest.mark.parametrize("unroll", [1, 2])
def test_measure_profiles_the_compute_alone_s_blocks(unroll):
  record = block_head.measure("transformer_tiny", batch_size=4,
                              unroll=unroll, blocks=3, warmup_blocks=2)
  # Every profiled block ran `unroll` loss ops (block_heads checks it).
  assert len(record["heads_ms"]) == len(record["blocks_ms"]) == 3
  for head, block in zip(record["heads_ms"], record["blocks_ms"]):
    assert 0 < head < block
  assert record["unroll"] == unroll and record["per_worker_batch"] == 4
  assert record["head_ms"] < record["block_ms"]
  assert record["step_ms"] > 0


def test_measure_needs_a_warm_up_and_a_block():
  with pytest.raises(ValueError, match="at least 1"):
    block_head.measure("transformer_tiny", 4, 1, blocks=0, warmup_blocks=2)
  with pytest.raises(ValueError, match="at least 1"):
    block_head.measure("transformer_tiny", 4, 1, blocks=2, warmup_blocks=0)
