"""The optimizer updates queued behind a block's collectives."""

import pytest

from tf_preempt.bench import update_backlog


def test_completed_tensors_count_each_tensor_at_its_last_piece():
  # Tensor 5 is chunked over the first two collectives: it is complete
  # (and updated) only after the second.
  issued = [{5, 6}, {5, 7, 8}, {1}]
  assert update_backlog.completed_tensors(issued) == [1, 3, 1]
  assert update_backlog.completed_tensors([]) == []


def test_backlog_is_the_last_collectives_own_updates_after_a_long_gap():
  # tf_default-like: one collective; the old model's part per tensor.
  assert update_backlog.backlog_s([(0.030, 22)], 1e-4) == pytest.approx(22e-4)
  # priority-like: one tensor every 1 ms, each update 0.2 ms: nothing of
  # the earlier ones is left.
  chain = [(0.020 + i * 1e-3, 1) for i in range(10)]
  assert update_backlog.backlog_s(chain, 2e-4) == pytest.approx(2e-4)


def test_backlog_carries_an_earlier_collectives_updates_over():
  # tf_packed-like: 12 tensors end 1.5 ms before the last 6; at 0.2 ms per
  # tensor 2.4 ms of work, 0.9 ms of it still queued, then 1.2 ms more.
  ends = [(0.010, 4), (0.0205, 12), (0.022, 6)]
  assert update_backlog.backlog_s(ends, 2e-4) == pytest.approx(0.9e-3 +
                                                               1.2e-3)
  # Later, less is left; before the first end, nothing.
  assert update_backlog.backlog_s(ends, 2e-4, at=0.0231) == pytest.approx(
      1.0e-3)
  assert update_backlog.backlog_s(ends, 2e-4, at=0.0) == 0.0
  # The order of the pairs does not matter; no work, no backlog.
  assert update_backlog.backlog_s(ends[::-1], 2e-4) == pytest.approx(2.1e-3)
  assert update_backlog.backlog_s(ends, 0.0) == 0.0
  assert update_backlog.backlog_s([], 2e-4) == 0.0
  with pytest.raises(ValueError, match="per_tensor_s"):
    update_backlog.backlog_s(ends, -1e-4)


def test_traced_ends_map_collective_ids_to_the_plans_tensors():
  completes = [4, 12, 6]
  ends = [(0.0205, 1), (0.022, 2)]
  assert update_backlog.traced_ends(ends, completes) == [(0.0205, 12),
                                                         (0.022, 6)]
  # An id the plan does not have (or none): only the last end, with the
  # plan's last collective's tensors.
  assert update_backlog.traced_ends([(0.0205, 1), (0.022, 7)],
                                    completes) == [(0.022, 6)]
  assert update_backlog.traced_ends([(0.022, None)], completes) == [(0.022,
                                                                     6)]
  assert update_backlog.traced_ends([], completes) == []
