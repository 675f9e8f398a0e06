"""Tests of tf_preempt.bench.xspace: a profile's calls and their ops."""

import pytest

from tf_preempt.bench import xspace
from tf_preempt.testing.profiles import fake_profile


def test_each_top_level_call_gets_the_ops_that_started_in_it():
  space = fake_profile(
      calls=[(0, 40), (5, 30), (50, 60)],  # the second nested in the first
      ops=[("b:MatMul", 20, 45), ("a:ReadVariableOp", 1, 2),
           ("between:Add", 46, 47), ("c:Mul", 50, 51)],
      program_ops=[("python:Op", 3, 4)])  # the program's own events: no op
  calls = xspace.train_calls(space)
  assert [(c.start_ns, c.end_ns) for c in calls] == [(0, 40_000_000),
                                                     (50_000_000, 60_000_000)]
  # By start, an op that outlasts its call included.
  assert [n for n, _, _ in calls[0].ops] == ["a:ReadVariableOp", "b:MatMul"]
  assert calls[0].ops[1] == ("b:MatMul", 20_000_000, 45_000_000)
  assert [n for n, _, _ in calls[1].ops] == ["c:Mul"]


def test_a_profile_without_the_host_or_a_call_is_refused():
  with pytest.raises(ValueError, match="no /host:CPU plane"):
    xspace.train_calls(fake_profile([(0, 1)], [], plane_name="/device:0"))
  with pytest.raises(ValueError, match="no eager call"):
    xspace.train_calls(fake_profile([], [("a:Add", 1, 2)]))
