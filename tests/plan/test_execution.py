"""Tests of the runtime execution model: hand-computed blocks and invariants."""

import dataclasses
import math

import numpy as np
import pytest

from tf_preempt.plan import CostModel
from tf_preempt.plan import Op
from tf_preempt.plan import SCHEDULERS
from tf_preempt.plan import SPLIT_SCHEDULERS
from tf_preempt.plan import SparseGradient
from tf_preempt.plan import TensorInfo
from tf_preempt.plan import TrainingDAG
from tf_preempt.plan import make_plan
from tf_preempt.plan import plan_from_groups
from tf_preempt.plan import simulate
from tf_preempt.plan import synthetic
from tf_preempt.plan.execution import ExecutionModel
from tf_preempt.plan.execution import exchange_tail
from tf_preempt.plan.execution import execute
from tf_preempt.plan.execution import lone_seconds
from tf_preempt.plan.execution import order_penalty_seconds
from tf_preempt.plan.execution import repeated_seconds

# b1 [.., +2] -> t1 (4 bytes); b0 [.., +1] -> t0 (8 bytes); f0, f1 1 s each.
_DAG = TrainingDAG.chain([1, 1], [1, 2], [8, 4])
_COST = CostModel(alpha=1.0, beta=0.5)


def _plan(dag, groups):
  tensors = make_plan(dag, CostModel(0, 0), "fifo").tensors
  return plan_from_groups(tensors, groups)


_FIFO = _plan(_DAG, [[(1, 0, 4)], [(0, 0, 8)]])
_PRIORITY = _plan(_DAG, [[(0, 0, 8)], [(1, 0, 4)]])


def _dags():
  rng = np.random.default_rng(7)
  return ([synthetic.chain(10, rng), synthetic.residual(3, rng),
           synthetic.transformer(2, rng)] +
          [synthetic.random_small(rng) for _ in range(12)])


def _plans(dag, cost):
  for scheduler in list(SCHEDULERS) + list(SPLIT_SCHEDULERS):
    if scheduler == "optimal" and len(dag.tensors) > 4:
      continue  # the exact solver's state limit
    yield scheduler, make_plan(dag, cost, scheduler)


@pytest.mark.parametrize("cost", [CostModel(1e-3, 1e-9), CostModel(0, 1e-8),
                                  CostModel(4e-3, 0)])
def test_defaults_are_the_planner_simulator(cost):
  for dag in _dags():
    for scheduler, plan in _plans(dag, cost):
      expected = simulate(dag, cost, plan)
      got = execute(dag, cost, plan)
      assert got.step_time == pytest.approx(expected.iteration_time,
                                            rel=1e-9, abs=1e-12), scheduler
      assert got.collective_end[0] == pytest.approx(expected.collective_end,
                                                    rel=1e-9, abs=1e-12)


def test_hand_computed_unrolled_block():
  # K=1: f0 [0,1] f1 [1,2] | b1 [2,4] b0 [4,5] | t1 [4,7] t0 [7,12].
  one = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=1))
  assert one.op_end[0]["b0"] == 5
  assert one.collective_launch == [[4, 7]]
  assert one.collective_end == [[7, 12]]
  assert one.block_time == 12 and one.step_time == 12
  # K=2, step 2: f0 waits for t0 (12) [12,13], f1 [13,14], b1 [14,16],
  # b0 [16,17]; t1 [16,19], t0 [19,24]. Block 24, 12 per step.
  two = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=2))
  assert two.op_start[1] == {"f0": 12, "f1": 13, "b1": 14, "b0": 16}
  assert two.collective_end == [[7, 12], [19, 24]]
  assert two.block_time == 24 and two.step_time == 12


def test_next_step_waits_only_for_its_own_layer():
  # Priority order, K=2: t0 [5,10], t1 [10,13]. Step 2's f0 reads t0 only
  # and starts at 10, before t1 ends; f1 waits for t1 (13).
  ex = execute(_DAG, _COST, _PRIORITY, ExecutionModel(unroll=2))
  assert ex.collective_end[0] == [10, 13]
  assert ex.op_start[1]["f0"] == 10 and ex.op_start[1]["f1"] == 13
  # b1 [14,16], b0 [16,17]; t0 [17,22], t1 [22,25].
  assert ex.block_time == 25 and ex.step_time == 12.5


def test_barrier_between_blocks():
  # With a barrier, one step is F + B + what is left of the collectives:
  # longer than the steady-state iteration whenever the forward pass
  # could have overlapped them (priority order here: 12 vs 13).
  steady = simulate(_DAG, _COST, _PRIORITY).iteration_time
  one = execute(_DAG, _COST, _PRIORITY, ExecutionModel(unroll=1))
  assert steady == 12
  assert one.step_time == 13  # F [0,2], B [2,5], t0 [5,10], t1 [10,13]


def test_long_block_tends_to_the_steady_state():
  # Every step after the first repeats the steady-state iteration exactly
  # (credit 1, all-reduces: the channel is free when a backward starts).
  cost = CostModel(2e-3, 2e-9)
  for dag in _dags()[:6]:
    for scheduler, plan in _plans(dag, cost):
      if not plan.is_all_reduce:
        continue
      steady = simulate(dag, cost, plan).iteration_time
      b2 = execute(dag, cost, plan, ExecutionModel(unroll=2)).block_time
      b3 = execute(dag, cost, plan, ExecutionModel(unroll=3)).block_time
      assert b3 - b2 == pytest.approx(steady, rel=1e-9), scheduler


def test_credit_two_overlaps_the_fixed_cost():
  # Credit 2, FIFO: t1 fixed [4,5] bytes [5,7]; t0 released at 5, fixed
  # [5,6], its bytes queue behind t1's: [7,11]. Step 2: f0 [11,12],
  # f1 [12,13], b1 [13,15], b0 [15,16]; t1 [15,16]+[16,18], t0 [16,17]
  # +[18,22]. Block 22 against 24 with credit 1.
  ex = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=2,
                                                   max_collectives=2))
  assert ex.collective_launch == [[4, 5], [15, 16]]
  assert ex.collective_end == [[7, 11], [18, 22]]
  assert ex.block_time == 22
  one_at_a_time = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=2))
  assert one_at_a_time.block_time == 24


def test_credit_never_slows_a_plan_down_here():
  cost = CostModel(3e-3, 1e-9)
  for dag in _dags()[:6]:
    for scheduler, plan in _plans(dag, cost):
      one = execute(dag, cost, plan, ExecutionModel(unroll=2))
      two = execute(dag, cost, plan, ExecutionModel(unroll=2,
                                                    max_collectives=2))
      assert two.block_time <= one.block_time + 1e-12, scheduler


def test_byte_credit():
  # 8 bytes of credit: t0 (8 B) cannot join t1 (4 B) in flight.
  tight = execute(_DAG, _COST, _FIFO, ExecutionModel(
      unroll=2, max_collectives=2, max_bytes=8))
  assert tight.block_time == 24
  loose = execute(_DAG, _COST, _FIFO, ExecutionModel(
      unroll=2, max_collectives=2, max_bytes=12))
  assert loose.block_time == 22
  # A collective larger than the credit still runs when nothing else is.
  tiny = execute(_DAG, _COST, _FIFO, ExecutionModel(
      unroll=2, max_collectives=2, max_bytes=1))
  assert tiny.block_time == 24


def test_cpu_contention_stretches_compute_by_the_cpu_cost():
  # Compute-bound chain: 5 s per op, collectives of 1 s (alpha only).
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 4])
  cost = CostModel(alpha=1.0, beta=0.0)
  plan = _plan(dag, [[(1, 0, 4)], [(0, 0, 4)]])
  free = execute(dag, cost, plan, ExecutionModel(unroll=1))
  # F [0,10], b1 [10,15], t1 [15,16], b0 [15,20], t0 [20,21].
  assert free.op_end[0]["b0"] == 20 and free.block_time == 21
  busy = execute(dag, cost, plan, ExecutionModel(unroll=1, cpu=cost))
  # t1's 1 s of CPU work stops b0 during [15,16]; t0 runs on an idle core.
  assert busy.op_end[0]["b0"] == 21 and busy.block_time == 22
  assert busy.cpu_seconds == pytest.approx(2.0)


def test_cpu_share_slows_compute_in_proportion():
  # Half of each collective is CPU work: b0 (1 s) overlaps t1 [4,7] at
  # half speed and ends at 6 instead of 5; t0 waits for t1 (credit 1).
  cpu = CostModel(alpha=0.5, beta=0.25)
  ex = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=1, cpu=cpu))
  assert ex.op_end[0]["b0"] == pytest.approx(6.0)
  assert ex.collective_end == [[7, 12]]
  # The CPU cost is capped at the collective's own duration.
  capped = execute(_DAG, _COST, _FIFO, ExecutionModel(
      unroll=1, cpu=CostModel(alpha=50.0, beta=50.0)))
  full = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=1, cpu=_COST))
  assert capped.block_time == full.block_time
  assert full.op_end[0]["b0"] == pytest.approx(8.0)  # stopped over [4,7]


def test_block_overhead_is_added_once_per_block():
  ex = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=2,
                                                  block_overhead=3.0))
  assert ex.block_time == 27 and ex.step_time == 13.5


def test_block_startup_shifts_the_whole_block():
  model = ExecutionModel(unroll=2, cpu=CostModel(0.5, 0.1),
                         link_burst=1.0, block_overhead=3.0)
  base = execute(_DAG, _COST, _FIFO, model)
  late = execute(_DAG, _COST, _FIFO,
                 dataclasses.replace(model, block_startup=2.5))
  assert late.block_time == pytest.approx(base.block_time + 2.5)
  assert late.step_time == pytest.approx(base.step_time + 1.25)
  for step in range(2):
    for op, start in base.op_start[step].items():
      assert late.op_start[step][op] == pytest.approx(start + 2.5)
    assert late.collective_end[step] == pytest.approx(
        [e + 2.5 for e in base.collective_end[step]])
  assert late.cpu_seconds == pytest.approx(base.cpu_seconds)


def test_early_compute_moves_the_later_steps_work_to_the_block_start():
  # 0.5 s of step 2's forward pass runs first: f0 [0.5,1.5], f1 [1.5,2.5],
  # b1 [2.5,4.5], b0 [4.5,5.5]; t1 [4.5,7.5], t0 [7.5,12.5]. Step 2's
  # forward pass takes 2 - 0.5 = 1.5 s (f0 [12.5,13.25], f1 [13.25,14]),
  # and the block ends as without it (24).
  model = ExecutionModel(unroll=2, early_compute=0.5)
  ex = execute(_DAG, _COST, _FIFO, model)
  assert ex.op_start[0]["f0"] == 0.5
  assert ex.op_start[1] == pytest.approx(
      {"f0": 12.5, "f1": 13.25, "b1": 14, "b0": 16})
  assert ex.block_time == pytest.approx(24)
  # K=1 has no later step: nothing moves.
  assert execute(_DAG, _COST, _FIFO, dataclasses.replace(
      model, unroll=1)).op_start[0]["f0"] == 0
  # Priority order: step 2's f1 waits for t1 anyway, so what it saves is
  # lost while the head's 0.5 s is not: t0 [5.5,10.5], t1 [10.5,13.5], f1
  # [13.5,14.25], b1 [14.25,16.25], b0 [16.25,17.25], t0, t1 to 25.25.
  ex = execute(_DAG, _COST, _PRIORITY, model)
  assert ex.op_start[1]["f1"] == pytest.approx(13.5)
  assert ex.block_time == pytest.approx(25.25)


def test_early_compute_beyond_the_forward_pass_is_rejected():
  with pytest.raises(ValueError, match="forward compute"):
    execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=2, early_compute=2.5))


@pytest.mark.parametrize("kwargs", [
    {"unroll": 0}, {"unroll": 1.5}, {"max_collectives": 0},
    {"max_bytes": 0}, {"cpu": (1e-3, 1e-9)}, {"block_overhead": -1.0},
    {"block_overhead": 1.0},  # needs unroll: the steady state has no block
    {"unroll": 1, "block_startup": -1.0},
    {"block_startup": 1.0},  # needs unroll
    {"unroll": 1, "block_startup": math.inf},
    {"unroll": 2, "early_compute": -1.0},
    {"early_compute": 1.0},  # needs unroll
    {"workers": 0}, {"workers": 1.5}, {"workers": True},
])
def test_bad_models_are_rejected(kwargs):
  with pytest.raises(ValueError):
    ExecutionModel(**kwargs)


def test_describe_names_every_setting():
  text = ExecutionModel(unroll=2, max_collectives=2, max_bytes=1 << 20,
                        cpu=CostModel(1.8e-3, 4e-9),
                        block_overhead=5e-3, block_startup=7e-3,
                        early_compute=1e-3).describe()
  for part in ("K=2", "2 collective(s) in flight", "1048576 B",
               "1.800 ms", "4.000 ns/B", "5.000 ms", "7.000 ms per block "
               "before its first op", "1.000 ms of each later step's "
               "forward pass at the block's start"):
    assert part in text
  assert "no compute time" in ExecutionModel().describe()


def _two_tensors_one_producer():
  # f [0,1], b [1,2]; t0 and t1 both ready at 2, both read by f.
  ops = [Op("f", "forward", 1.0), Op("b", "backward", 1.0)]
  tensors = [TensorInfo("t0", 4, "b", ("f",)), TensorInfo("t1", 4, "b", ("f",))]
  dag = TrainingDAG(ops, [], tensors)
  return dag, _plan(dag, [[(0, 0, 4)], [(1, 0, 4)]])


def test_collectives_in_flight_share_the_core():
  dag, plan = _two_tensors_one_producer()
  cost = CostModel(alpha=1.0, beta=0.0)
  two = ExecutionModel(unroll=1, max_collectives=2)
  # Without CPU cost both fixed costs overlap: [2,3] each.
  assert execute(dag, cost, plan, two).collective_end == [[3, 3]]
  # All of alpha is CPU work: the two share the one core and end at 4,
  # no earlier than one at a time.
  both = execute(dag, cost, plan, dataclasses.replace(two, cpu=cost))
  assert both.collective_end == [[4, 4]]
  one = execute(dag, cost, plan, ExecutionModel(unroll=1, cpu=cost))
  assert one.collective_end == [[3, 4]]


def test_comm_cpu_share_while_computing():
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 4])
  cost = CostModel(alpha=1.0, beta=0.0)
  plan = _plan(dag, [[(1, 0, 4)], [(0, 0, 4)]])
  # Fair time-slicing: t1's 1 s of CPU work overlaps b0 [15, ..] at half
  # the core, so t1 ends at 17 (not 16); b0 still loses 1 s of core.
  fair = execute(dag, cost, plan, ExecutionModel(unroll=1, cpu=cost,
                                                 comm_cpu_share=0.5))
  assert fair.collective_end == [[17, 22]]
  assert fair.op_end[0]["b0"] == 21
  first = execute(dag, cost, plan, ExecutionModel(unroll=1, cpu=cost))
  assert first.collective_end == [[16, 22]]


def test_bytes_slow_down_without_their_core_share():
  # beta 1 s/B, half of it CPU work; the collectives get a quarter of the
  # core while b0 (5 s) computes. t1 (4 B) starts at 15 at half speed;
  # b0 runs at 0.75 and ends at 15 + 5/0.75; t1 has 4 - 5/0.75/2 left,
  # then runs at full speed; t0 (4 s) follows (credit 1).
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 4])
  cost = CostModel(alpha=0.0, beta=1.0)
  plan = _plan(dag, [[(1, 0, 4)], [(0, 0, 4)]])
  ex = execute(dag, cost, plan, ExecutionModel(
      unroll=1, cpu=CostModel(0.0, 0.5), comm_cpu_share=0.25))
  b0_end = 15 + 5 / 0.75
  t1_end = b0_end + (4 - (b0_end - 15) * 0.5)
  assert ex.op_end[0]["b0"] == pytest.approx(b0_end)
  assert ex.collective_end[0] == pytest.approx([t1_end, t1_end + 4])
  assert ex.cpu_seconds == pytest.approx(4.0)  # 0.5 s/B x 8 B


def test_bad_share_is_rejected():
  for share in (0.0, 1.5, -0.1):
    with pytest.raises(ValueError):
      ExecutionModel(comm_cpu_share=share)


def _two_collectives_during_a_long_backward_op():
  """t1 and t2 ready after b1 (1 s), each its own collective; b0 10 s."""
  ops = [Op("f", "forward", 1.0), Op("b1", "backward", 1.0),
         Op("b0", "backward", 10.0)]
  tensors = [TensorInfo("t0", 4, "b0", ("f",)),
             TensorInfo("t1", 4, "b1", ("f",)),
             TensorInfo("t2", 4, "b1", ("f",))]
  dag = TrainingDAG(ops, [("b1", "b0")], tensors)
  return dag, _plan(dag, [[(1, 0, 4)], [(2, 0, 4)], [(0, 0, 4)]])


def test_share_is_per_collective_while_computing():
  # Two collectives whose CPU work (1 s each) overlaps a 10 s backward op:
  # with a share of 0.25 each progresses at 0.25 and the op at 0.5.
  dag, plan = _two_collectives_during_a_long_backward_op()
  cost = CostModel(alpha=1.0, beta=0.0)
  ex = execute(dag, cost, plan, ExecutionModel(
      unroll=1, max_collectives=2, cpu=cost, comm_cpu_share=0.25))
  # f [0,1], b1 [1,2]; t1, t2 released at 2, each done at 2 + 1/0.25 = 6;
  # b0 does 2 s of work by 6, then 8 s alone: ends at 14; t0 [14,15].
  assert ex.collective_end == [[6, 6, 15]]
  assert ex.op_end[0]["b0"] == pytest.approx(14.0)


def test_bytes_cpu_share_apart_from_the_fixed_work():
  # As test_bytes_slow_down_without_their_core_share, but the bytes get
  # the core they need (0.5) while b0 computes: t1 moves at full speed
  # [15,19]; b0 runs at 0.5 meanwhile (2 s of work), then 3 s alone: 22.
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 4])
  cost = CostModel(alpha=0.0, beta=1.0)
  plan = _plan(dag, [[(1, 0, 4)], [(0, 0, 4)]])
  ex = execute(dag, cost, plan, ExecutionModel(
      unroll=1, cpu=CostModel(0.0, 0.5), comm_cpu_share=0.25,
      bytes_cpu_share=1.0))
  assert ex.collective_end[0][0] == pytest.approx(19.0)
  assert ex.op_end[0]["b0"] == pytest.approx(22.0)  # 2 s by 19, 3 s more
  with pytest.raises(ValueError):
    ExecutionModel(bytes_cpu_share=0.0)
  assert "1 of it for the bytes" in ExecutionModel(
      cpu=cost, bytes_cpu_share=1.0).describe()


def test_latency_behind_bytes_waits_for_the_link_to_drain():
  # t1's collective: latency [15, 17], its 12 bytes [17, 29]. t0's is
  # released at 20 (b0's end): its round trips overlap t1's bytes, then
  # its 4 bytes queue behind them, [29, 33]; or, behind the bytes, its
  # latency waits for them, [29, 31], then its bytes [31, 35].
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 12])
  cost = CostModel(alpha=2.0, beta=1.0)
  plan = _plan(dag, [[(1, 0, 12)], [(0, 0, 4)]])
  overlap = execute(dag, cost, plan, ExecutionModel(unroll=1,
                                                    max_collectives=2))
  behind = execute(dag, cost, plan, ExecutionModel(
      unroll=1, max_collectives=2, latency_behind_bytes=True))
  assert overlap.collective_end[0] == pytest.approx([29.0, 33.0])
  assert behind.collective_end[0] == pytest.approx([29.0, 35.0])
  assert behind.collective_launch[0] == pytest.approx([15.0, 20.0])
  # A collective alone on the link has nothing ahead of it.
  alone = _plan(dag, [[(1, 0, 12), (0, 0, 4)]])
  assert execute(dag, cost, alone, ExecutionModel(
      unroll=1, latency_behind_bytes=True)).collective_end[0] == (
          pytest.approx(execute(dag, cost, alone, ExecutionModel(
              unroll=1)).collective_end[0]))
  assert "waits for the bytes ahead" in ExecutionModel(
      latency_behind_bytes=True).describe()
  with pytest.raises(ValueError):
    ExecutionModel(latency_behind_bytes=1)


# _DAG with t0 an embedding: 8 bytes dense, but 4 bytes of rows and 2 of
# indices per worker and step arrive as IndexedSlices.
_SPARSE_DAG = TrainingDAG(
    _DAG.ops, _DAG.edges,
    [dataclasses.replace(_DAG.tensors[0], sparse=SparseGradient(4, 2)),
     _DAG.tensors[1]])


def test_sparse_marks_are_ignored_without_workers():
  for plan in (_FIFO, _PRIORITY):
    assert execute(_SPARSE_DAG, _COST, plan).step_time == simulate(
        _SPARSE_DAG, _COST, plan).iteration_time
    assert (execute(_SPARSE_DAG, _COST, plan, ExecutionModel(unroll=2)) ==
            execute(_DAG, _COST, plan, ExecutionModel(unroll=2)))


def test_sparse_tensor_is_all_gathered_after_the_dense_collectives():
  # 2 workers: an all-gather of b bytes per worker costs 1 + 0.5 b. K=1:
  # F [0,2], b1 [2,4], b0 [4,5]. t0's collective is not issued; t1 [4,7]
  # (bytes [5,7]). The row count (4 B) is released with t1, outside the
  # credit of 1: fixed [4,5], its bytes queue behind t1's: [7,9]. Rows
  # (4 B) and indices (2 B) then: fixed [9,10], bytes [10,12] and [12,13].
  model = ExecutionModel(unroll=1, workers=2)
  one = execute(_SPARSE_DAG, _COST, _FIFO, model)
  assert one.collective_launch == [[4]] and one.collective_end == [[7]]
  assert one.exchange_launch == [[4, 9, 9]]
  assert one.exchange_end == [[9, 12, 13]]
  assert one.block_time == 13  # all-reduced as planned: 12
  assert execute(_SPARSE_DAG, _COST, _FIFO,
                 ExecutionModel(unroll=1)).block_time == 12
  # K=2: step 2's f0 reads t0 and waits for its rows and indices (13):
  # f0 [13,14] .. b0 [17,18]; t1 [17,20]; count [17,18] + [20,22]; rows
  # and indices [22,23] + [23,25], [25,26].
  two = execute(_SPARSE_DAG, _COST, _FIFO, dataclasses.replace(model,
                                                               unroll=2))
  assert two.op_start[1]["f0"] == 13
  assert two.exchange_end == [[9, 12, 13], [22, 25, 26]]
  assert two.block_time == 26 and two.step_time == 13


def test_sparse_pieces_leave_fused_collectives():
  # t0 fused with t1, as a planner that ignores sparsity would plan: the
  # runtime reduces only t1's 4 bytes, without waiting for t0's producer.
  fused = _plan(_SPARSE_DAG, [[(0, 0, 8), (1, 0, 4)]])
  ex = execute(_SPARSE_DAG, _COST, fused, ExecutionModel(unroll=1,
                                                         workers=2))
  assert ex.collective_launch == [[4]] and ex.collective_end == [[7]]
  assert ex.block_time == 13


def test_all_gather_moves_n_minus_1_shares_through_each_link():
  # n workers: beta * n * b / 2, so with 3 the count's bytes take 3 s
  # ([7,10]), the rows' 3 s and the indices' 1.5 s: fixed [10,11], rows
  # [11,14], indices [14,15.5].
  ex = execute(_SPARSE_DAG, _COST, _FIFO, ExecutionModel(unroll=1,
                                                         workers=3))
  assert ex.exchange_end == [[10, 14, 15.5]]
  # One worker moves nothing: only the fixed costs remain.
  solo = execute(_SPARSE_DAG, _COST, _FIFO, ExecutionModel(unroll=1,
                                                           workers=1))
  assert solo.exchange_end == [[7, 8, 8]]


def test_exchange_tail_is_what_follows_the_first_all_gather():
  # Alone: count fixed [0,1], bytes [1,3]; rows and indices fixed [3,4],
  # bytes [4,6] and [6,7]: 4 s after the count.
  model = ExecutionModel(unroll=2, block_overhead=9.0, workers=2)
  assert exchange_tail(_SPARSE_DAG, _COST, model) == 4
  # Their fixed CPU work shares the core: both end at 5, then 3 s of bytes.
  assert exchange_tail(_SPARSE_DAG, _COST, dataclasses.replace(
      model, cpu=_COST)) == 5
  assert exchange_tail(_SPARSE_DAG, _COST, ExecutionModel(unroll=1)) == 0
  assert exchange_tail(_DAG, _COST, model) == 0
  assert "all-gathered over 2 worker(s)" in model.describe()


def test_token_bucket_lets_a_burst_through_at_once():
  # A bucket of 1.5 s of traffic, full at the start. t1 (2 s of bytes):
  # fixed [4,5], 1.5 s of it at once, 0.5 s at the rate: ends at 5.5. The
  # link then idles through t0's fixed cost [5.5,6.5] and refills by 1 s;
  # t0's 4 s: 1 at once, 3 at the rate: [6.5,9.5]. A plain rate: 12.
  ex = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=1, link_burst=1.5))
  assert ex.collective_launch == [[4, 5.5]]
  assert ex.collective_end == [[5.5, 9.5]]
  assert ex.block_time == 9.5
  assert execute(_DAG, _COST, _FIFO, ExecutionModel(
      unroll=1, link_burst=0.0)).block_time == 12


def test_token_bucket_burst_is_as_fast_as_its_cpu_work():
  # The bytes need half of the core at the rate (cpu.beta / beta = 0.5),
  # so with tokens and an idle core they go at twice the rate and the
  # bucket drains at 1 s per s. t1 (2 s of bytes at t=5, 1.5 s of tokens):
  # all of it at twice the rate, [5,6], 0.5 s of tokens left; t0's fixed
  # cost [6,7] refills to the cap 1.5; its 4 s: 3 at twice the rate
  # [7,8.5], the last 1 at the rate: 9.5.
  cpu = CostModel(alpha=0.0, beta=0.25)
  ex = execute(_DAG, _COST, _FIFO, ExecutionModel(unroll=1, cpu=cpu,
                                                  link_burst=1.5))
  assert ex.collective_end[0] == pytest.approx([6.0, 9.5])
  # The per-byte CPU work is the same as at the rate: 0.25 s/B x 12 B.
  assert ex.cpu_seconds == pytest.approx(3.0)


def test_token_bucket_burst_takes_the_core_from_compute():
  # As test_bytes_cpu_share_apart_from_the_fixed_work with a bucket of
  # 2 s: t1 (4 s of bytes, released at 15 while b0 computes) takes the
  # whole core (bytes_cpu_share 1) and goes at twice the rate until the
  # bucket is empty, which is when its bytes are done: [15,17]; b0 is
  # stopped meanwhile and ends at 22; the bucket refills by then; t0's
  # 4 s go in 2: [22,24]. Without the bucket: t1 [15,19], t0 [22,26].
  dag = TrainingDAG.chain([5, 5], [5, 5], [4, 4])
  cost = CostModel(alpha=0.0, beta=1.0)
  plan = _plan(dag, [[(1, 0, 4)], [(0, 0, 4)]])
  model = ExecutionModel(unroll=1, cpu=CostModel(0.0, 0.5),
                         comm_cpu_share=0.25, bytes_cpu_share=1.0,
                         link_burst=2.0)
  ex = execute(dag, cost, plan, model)
  assert ex.collective_end[0] == pytest.approx([17.0, 24.0])
  assert ex.op_end[0]["b0"] == pytest.approx(22.0)
  assert ex.cpu_seconds == pytest.approx(4.0)
  plain = execute(dag, cost, plan, dataclasses.replace(model,
                                                       link_burst=0.0))
  assert plain.collective_end[0] == pytest.approx([19.0, 26.0])


def test_bucket_larger_than_every_transfer_makes_bytes_free():
  # Without CPU cost, a bucket that never empties is a link of infinite
  # speed: the same as beta = 0.
  cost = CostModel(2e-3, 4e-8)
  free = CostModel(2e-3, 0.0)
  for dag in _dags()[:6]:
    burst = 10 * cost.beta * sum(t.nbytes for t in dag.tensors)
    for scheduler, plan in _plans(dag, cost):
      for model in (ExecutionModel(unroll=2, max_collectives=2),
                    ExecutionModel(unroll=1)):
        got = execute(dag, cost, plan, dataclasses.replace(
            model, link_burst=burst))
        assert got.block_time == pytest.approx(
            execute(dag, free, plan, model).block_time, rel=1e-9), scheduler


def _back_to_back(cost, nbytes, model, repeats=30):
  """The last of `repeats` all-reduces of `nbytes`, each issued when the
  previous one ends (no compute), as `execute` runs them: its seconds."""
  ops = [Op("f", "forward", 0.0), Op("b", "backward", 0.0)]
  dag = TrainingDAG(ops, [], [TensorInfo("t", nbytes, "b", ("f",))])
  ex = execute(dag, cost, _plan(dag, [[(0, 0, nbytes)]]),
               dataclasses.replace(model, unroll=repeats))
  return ex.collective_end[-1][0] - ex.collective_launch[-1][0]


@pytest.mark.parametrize("cpu", [None, CostModel(1e-3, 4e-9),
                                 CostModel(1e-3, 8e-8)])
@pytest.mark.parametrize("burst", [0.0, 4e-3, 1e-3])
def test_repeated_seconds_is_the_execution_in_steady_state(cpu, burst):
  # 200 Mbit/s-like: 40 ns/B, a 2 ms fixed cost, a bucket of 4 ms (or
  # less than the fixed cost, or none); sizes below and above a burst.
  cost = CostModel(2e-3, 4e-8)
  model = ExecutionModel(cpu=cpu, link_burst=burst)
  for nbytes in (256, 8192, 32768, 49152, 131072, 524288, 4 << 20):
    assert repeated_seconds(cost, nbytes, model) == pytest.approx(
        _back_to_back(cost, nbytes, model), rel=1e-9, abs=1e-12), nbytes
  # Without a bucket it is the cost model itself.
  assert repeated_seconds(cost, 1 << 20) == cost.seconds(1 << 20)


@pytest.mark.parametrize("cpu", [None, CostModel(1e-3, 4e-9),
                                 CostModel(1e-3, 8e-8)])
@pytest.mark.parametrize("burst", [0.0, 4e-3, 1e-3])
def test_lone_seconds_is_the_execution_of_one_collective(cpu, burst):
  # The first of the back-to-back repeats: released on an idle core and
  # an idle link, its bucket full.
  cost = CostModel(2e-3, 4e-8)
  model = ExecutionModel(cpu=cpu, link_burst=burst)
  for nbytes in (256, 8192, 49152, 131072, 524288, 4 << 20):
    assert lone_seconds(cost, nbytes, model) == pytest.approx(
        _back_to_back(cost, nbytes, model, repeats=1), rel=1e-9,
        abs=1e-12), nbytes
  # With a full bucket a large collective is faster alone than repeated
  # (whose fixed cost refills only part of the bucket).
  if burst > cost.alpha and (cpu is None or cpu.beta < cost.beta):
    assert lone_seconds(cost, 4 << 20, model) < repeated_seconds(
        cost, 4 << 20, model)
  assert lone_seconds(cost, 1 << 20) == cost.seconds(1 << 20)


def test_repeated_seconds_hides_the_fixed_cost_behind_a_bucket():
  # The shape of the 200 Mbit/s samples: sizes whose bytes fit in what
  # the fixed cost refills take alpha (plus their CPU time); larger ones
  # take their bytes' time at the rate, alpha hidden.
  cost = CostModel(1.8e-3, 42e-9)
  model = ExecutionModel(link_burst=4e-3)
  assert repeated_seconds(cost, 32768, model) == 1.8e-3
  assert repeated_seconds(cost, 524296, model) == pytest.approx(
      42e-9 * 524296)


def test_link_burst_is_checked_and_described():
  for burst in (-1.0, math.inf, math.nan, True, "4ms"):
    with pytest.raises(ValueError):
      ExecutionModel(link_burst=burst)
  assert "token bucket of 4.000 ms" in ExecutionModel(
      link_burst=4e-3).describe()
  assert "token bucket" not in ExecutionModel().describe()


def test_fixed_cpu_fifo_serves_collectives_in_release_order():
  # Two collectives released together at 2 on an idle core, 1 s of CPU
  # work each. Shared, both end at 4; one at a time, at 3 and 4.
  dag, plan = _two_tensors_one_producer()
  cost = CostModel(alpha=1.0, beta=0.0)
  shared = ExecutionModel(unroll=1, max_collectives=2, cpu=cost)
  fifo = dataclasses.replace(shared, fixed_cpu_fifo=True)
  assert execute(dag, cost, plan, shared).collective_end == [[4, 4]]
  assert execute(dag, cost, plan, fifo).collective_end == [[3, 4]]
  # With 1 s of latency after the CPU part (alpha 2): shared, both CPU
  # parts end at 4 and both collectives at 5; one at a time, the first
  # ends a CPU part before the second: [4, 5], the measured pattern.
  slow = CostModel(alpha=2.0, beta=0.0)
  assert execute(dag, slow, plan, shared).collective_end == [[5, 5]]
  assert execute(dag, slow, plan, fifo).collective_end == [[4, 5]]
  assert "one collective at a time" in fifo.describe()
  with pytest.raises(ValueError):
    ExecutionModel(fixed_cpu_fifo=1)


def test_fixed_cpu_fifo_leaves_the_share_while_computing():
  # test_share_is_per_collective_while_computing: compute runs throughout
  # the two collectives' CPU work, so the order changes nothing.
  dag, plan = _two_collectives_during_a_long_backward_op()
  cost = CostModel(alpha=1.0, beta=0.0)
  ex = execute(dag, cost, plan, ExecutionModel(
      unroll=1, max_collectives=2, cpu=cost, comm_cpu_share=0.25,
      fixed_cpu_fifo=True))
  assert ex.collective_end == [[6, 6, 15]]


_PENALTY = ((2.0, 4.0), (6.0, 5.0))


def test_order_penalty_seconds_interpolates_from_zero_and_stays_flat():
  assert order_penalty_seconds(_PENALTY, -1.0) == 0
  assert order_penalty_seconds(_PENALTY, 0.0) == 0
  assert order_penalty_seconds(_PENALTY, 1.0) == pytest.approx(2.0)
  assert order_penalty_seconds(_PENALTY, 4.0) == pytest.approx(4.5)
  assert order_penalty_seconds(_PENALTY, 60.0) == pytest.approx(5.0)
  assert order_penalty_seconds((), 3.0) == 0


# Both tensors in one all-reduce, released at 5 when b0 ends: 12 bytes,
# 6 s of them, a rank's half 3 s.
_ONE = _plan(_DAG, [[(1, 0, 4), (0, 0, 8)]])


def test_order_penalty_delays_a_blocks_first_lone_collective():
  # Released alone onto an idle link and core: + 0.5 x (4 + (3 - 2) / 4).
  model = ExecutionModel(unroll=1)
  base = execute(_DAG, _COST, _ONE, model)
  late = execute(_DAG, _COST, _ONE, dataclasses.replace(
      model, order_penalty=_PENALTY, order_penalty_weight=0.5))
  assert base.collective_end == [[12]]
  assert late.collective_launch == [[5]]
  assert late.collective_end == [[pytest.approx(14.125)]]
  # Weight 0, or a half that fits the bucket (3 s): nothing.
  for other in (dataclasses.replace(model, order_penalty=_PENALTY),
                dataclasses.replace(model, order_penalty=_PENALTY,
                                    order_penalty_weight=1.0,
                                    link_burst=3.0)):
    assert (execute(_DAG, _COST, _ONE, other).collective_end ==
            execute(_DAG, _COST, _ONE, dataclasses.replace(
                other, order_penalty=())).collective_end)


def test_order_penalty_spares_what_compute_credit_or_a_later_step_overlaps():
  # FIFO: t1 is released at 4 while b0 computes; t0 at 5 with t1 in
  # flight (credit 2) or, with credit 1, at t1's end, which both workers
  # see at once: no penalty anywhere.
  for credit in (1, 2):
    model = ExecutionModel(unroll=1, max_collectives=credit)
    late = dataclasses.replace(model, order_penalty=_PENALTY,
                               order_penalty_weight=0.5)
    assert (execute(_DAG, _COST, _FIFO, late).collective_end ==
            execute(_DAG, _COST, _FIFO, model).collective_end)
  # K=2: only the first step's collective pays; the second step starts
  # after the first step's reduction.
  model = ExecutionModel(unroll=2)
  base = execute(_DAG, _COST, _ONE, model)
  late = execute(_DAG, _COST, _ONE, dataclasses.replace(
      model, order_penalty=_PENALTY, order_penalty_weight=0.5))
  assert late.block_time == pytest.approx(base.block_time + 2.125)
  assert late.collective_end[1][0] - late.collective_launch[1][0] == (
      pytest.approx(base.collective_end[1][0] -
                    base.collective_launch[1][0]))


@pytest.mark.parametrize("kwargs", [
    {"unroll": 1, "order_penalty": ((0.0, 1.0),)},
    {"unroll": 1, "order_penalty": ((1.0, -1.0),)},
    {"unroll": 1, "order_penalty": ((1.0, math.nan),)},
    {"order_penalty": _PENALTY},  # needs unroll
    {"unroll": 1, "order_penalty_weight": 1.5},
    {"unroll": 1, "order_penalty_weight": -0.1},
])
def test_bad_order_penalty_is_rejected(kwargs):
  with pytest.raises(ValueError):
    ExecutionModel(**kwargs)


def test_order_penalty_is_described():
  text = ExecutionModel(unroll=1, order_penalty=_PENALTY,
                        order_penalty_weight=0.25).describe()
  assert "arrival-order penalty x 0.25" in text
  assert "penalty" not in ExecutionModel(unroll=1).describe()
