"""Random DAGs and cost models through every scheduler.

For each case `make_plan` must either raise ValueError or return a plan
that passes the simulator's invariants, checked here independently of the
planner: every byte of every tensor is reduced exactly once, collectives do
not overlap on the channel and none starts before its tensors are ready,
each forward op of the next iteration starts after the collectives of the
tensors it reads, and the iteration time is finite and matches the plan's
prediction. A case that runs longer than `CASE_LIMIT_S` counts as a hang.
"""

import contextlib
import math
import signal
import time

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from tf_preempt import plan as plan_lib
from tf_preempt.plan import synthetic

CASE_LIMIT_S = 5.0
EXAMPLES = 2000
# Float slack of the simulator's max/sum arithmetic.
EPS = 1e-9

_OPTION_VALUES = {
    "chunk_bytes": st.one_of(st.none(), st.integers(-8, 400)),
    "fuse": st.booleans(),
    "bytes_per_pack": st.integers(-4, 400),
    "fusion_threshold": st.integers(-4, 400),
    "cycle_time_s": st.one_of(st.floats(-1.0, 1.0),
                              st.sampled_from([math.nan, math.inf, 5e-309])),
    "bucket_cap_bytes": st.integers(-4, 400),
    "first_bucket_bytes": st.integers(-4, 400),
    "partition_elements": st.integers(-2, 100),
    "credit_elements": st.integers(-2, 100),
}


class CaseTimeout(Exception):
  pass


@contextlib.contextmanager
def _time_limit(seconds):
  def fire(signum, frame):
    raise CaseTimeout(f"case ran longer than {seconds} s")
  previous = signal.signal(signal.SIGALRM, fire)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@st.composite
def cases(draw):
  n = draw(st.integers(1, 6))
  durations = {f"op{i}": draw(st.floats(0.0, 2.0)) for i in range(n)}
  edges = [(f"op{a}", f"op{b}") for b in range(1, n) for a in range(b)
           if draw(st.booleans())]
  tensors = []
  for i in range(draw(st.integers(1, 6))):
    # Several tensors may share a producer and be read by another op.
    op = draw(st.integers(0, n - 1))
    tensors.append((f"t{i}", 4 * draw(st.integers(1, 64)), f"op{op}"))
  backward_factor = draw(st.floats(0.0, 3.0))
  alpha = draw(st.one_of(st.just(0.0), st.floats(1e-6, 1.0)))
  beta = draw(st.one_of(st.just(0.0), st.floats(1e-9, 1e-1)))
  scheduler = draw(st.sampled_from(plan_lib.SCHEDULERS))
  options = {}
  for name in plan_lib.options_of(scheduler):
    if name in _OPTION_VALUES and draw(st.booleans()):
      options[name] = draw(_OPTION_VALUES[name])
  return durations, edges, tensors, backward_factor, alpha, beta, scheduler, \
      options


def check_invariants(dag, cost, plan):
  """Asserts the invariants of the module docstring."""
  assert len(plan.tensors) == len(dag.tensors)
  covered = [[] for _ in dag.tensors]
  for c in plan.collectives:
    assert c.pieces, "empty collective"
    for p in c.pieces:
      assert p.length > 0
      covered[p.tensor].append((p.offset, p.length))
  for t, spans in zip(dag.tensors, covered):
    at = 0
    for offset, length in sorted(spans):
      assert offset == at, f"{t.name}: bytes {at}..{offset} missed or twice"
      at = offset + length
    assert at == t.nbytes, f"{t.name}: {at} of {t.nbytes} bytes reduced"
  timeline = plan_lib.simulate(dag, cost, plan)
  ready = timeline.tensor_ready
  for k, c in enumerate(plan.collectives):
    start, end = timeline.collective_start[k], timeline.collective_end[k]
    assert math.isfinite(start) and math.isfinite(end)
    if k:
      assert start >= timeline.collective_end[k - 1] - EPS, "channel overlap"
    for t in c.tensors:
      assert start >= ready[dag.tensors[t].name] - EPS, "sent before ready"
  for t in dag.tensors:
    for op in t.consumers:
      assert (timeline.op_start[op] >=
              timeline.tensor_reduced[t.name] - EPS), (
                  f"{op} starts before {t.name} is reduced")
  it = timeline.iteration_time
  assert math.isfinite(it) and it >= 0
  assert plan.predicted_iteration_s is not None
  assert math.isclose(plan.predicted_iteration_s, it, rel_tol=1e-9,
                      abs_tol=1e-12)
  # The plan survives its own JSON round trip with the same fingerprint.
  again = plan_lib.Plan.from_json(plan.to_json())
  assert again.fingerprint() == plan.fingerprint()


_FIGURES = {"cases": 0, "plans": 0, "value_errors": 0, "slowest_s": 0.0}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def _fuzz(case):
  durations, edges, tensors, factor, alpha, beta, scheduler, options = case
  _FIGURES["cases"] += 1
  start = time.perf_counter()
  with _time_limit(CASE_LIMIT_S):
    try:
      dag = synthetic.from_forward(durations, edges, tensors, factor)
      cost = plan_lib.CostModel(alpha, beta)
      plan = plan_lib.make_plan(dag, cost, scheduler, **options)
    except ValueError:
      _FIGURES["value_errors"] += 1
      return
    check_invariants(dag, cost, plan)
  _FIGURES["plans"] += 1
  _FIGURES["slowest_s"] = max(_FIGURES["slowest_s"],
                              time.perf_counter() - start)


def test_make_plan_returns_a_valid_plan_or_raises_value_error():
  start = time.perf_counter()
  _fuzz()  # pylint: disable=no-value-for-parameter
  print(f"[fuzz] {_FIGURES['cases']} cases in "
        f"{time.perf_counter() - start:.1f}s: {_FIGURES['plans']} valid "
        f"plans, {_FIGURES['value_errors']} ValueError, slowest case "
        f"{_FIGURES['slowest_s'] * 1e3:.0f} ms")
  assert _FIGURES["cases"] >= EXAMPLES


@pytest.mark.parametrize("cycle_time_s,durations,tensors", [
    # The fuzzer's shrunk examples of a bug it found: the cycle clock became
    # NaN and the loop never ended, or the cycle count overflowed.
    (math.nan, {"op0": 0.0, "op1": 1.0, "op2": 0.0},
     [("t0", 4, "op0"), ("t1", 4, "op1")]),
    (math.inf, {"op0": 1.0, "op1": 0.0, "op2": 0.0}, [("t0", 4, "op0")]),
    (5e-309, {"op0": 1.0, "op1": 0.0}, [("t0", 4, "op0")]),
])
def test_horovod_degenerate_cycle_time_is_rejected(cycle_time_s, durations,
                                                   tensors):
  dag = synthetic.from_forward(durations, [], tensors, 1.0)
  with _time_limit(2.0):
    with pytest.raises(ValueError):
      plan_lib.make_plan(dag, plan_lib.CostModel(0.0, 0.0), "horovod",
                         cycle_time_s=cycle_time_s)
