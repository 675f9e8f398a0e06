"""The scheduling instance a DAG and a cost model reduce to.

For every tensor p the schedulers need only four numbers: its size, its ready
time r_p (end of its producer, backward pass starting at 0), its tail q_p (the
longest forward path starting at a consumer) and its element size. With C_p
the end of the last collective holding a byte of p, B the end of the backward
pass and F the longest forward path, the simulator's iteration time is

    max(B + F, max_p (C_p + q_p), end of the last collective)

because a forward op starts at max(B, its predecessors' ends, C_p of what it
reads) and longest paths add up. Minimising it is a one-machine problem with
release dates r_p and delivery times q_p (1|r_j|Lmax in Graham notation):
Jackson's preemptive rule, "send the ready byte with the largest q", is
optimal when preemption is free; chunk boundaries cost at most one chunk.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

import numpy as np

from tf_preempt.plan import cost as cost_lib
from tf_preempt.plan import dag as dag_lib
from tf_preempt.plan import plan as plan_lib

# A collective as the schedulers build it: [(tensor, offset, length)].
Group = List[Tuple[int, int, int]]


def channel_ends(ready: np.ndarray, durations: np.ndarray) -> np.ndarray:
  """End times of collectives run one at a time in the given order.

  end_k = max(end_{k-1}, ready_k) + d_k, computed as a max-plus scan:
  end_k = S_k + max_{j<=k} (ready_j - S_{j-1}) with S the prefix sums of d.

  Args:
    ready: earliest start of each collective.
    durations: duration of each collective.

  Returns:
    The end time of each collective.
  """
  s = np.cumsum(durations)
  prev = s - durations
  return s + np.maximum.accumulate(np.maximum(ready, 0.0) - prev)


@dataclasses.dataclass
class Problem:
  """Per-tensor numbers of a DAG under a cost model.

  Attributes:
    names: tensor names, in DAG order.
    nbytes: sizes (int64).
    itemsize: element sizes (int64).
    ready: r_p.
    tail: q_p.
    backward_end: B.
    forward_length: F.
    alpha: seconds per collective.
    beta: seconds per byte.
  """
  names: Tuple[str, ...]
  nbytes: np.ndarray
  itemsize: np.ndarray
  ready: np.ndarray
  tail: np.ndarray
  backward_end: float
  forward_length: float
  alpha: float
  beta: float

  @classmethod
  def from_dag(cls, dag: dag_lib.TrainingDAG, cost: cost_lib.CostModel
               ) -> "Problem":
    return cls(names=tuple(t.name for t in dag.tensors),
               nbytes=np.array([t.nbytes for t in dag.tensors], np.int64),
               itemsize=np.array([t.itemsize for t in dag.tensors], np.int64),
               ready=dag.ready_times().astype(float),
               tail=dag.tensor_tails().astype(float),
               backward_end=dag.backward_end(),
               forward_length=dag.forward_length(),
               alpha=cost.alpha, beta=cost.beta)

  @property
  def num_tensors(self) -> int:
    return len(self.names)

  @property
  def floor(self) -> float:
    """B + F: no schedule finishes earlier."""
    return self.backward_end + self.forward_length

  def priority_order(self) -> np.ndarray:
    """Tensors by decreasing tail q (ties: earlier ready, then index)."""
    idx = np.arange(self.num_tensors)
    return np.lexsort((idx, self.ready, -self.tail))

  def evaluate(self, groups: Sequence[Group],
               kinds: Optional[Sequence[str]] = None) -> float:
    """The iteration time of collectives issued in this order.

    Args:
      groups: collectives, each a list of (tensor, offset, length).
      kinds: per collective, one of `plan.KINDS`; None: all all-reduces.
        A reduce-scatter or an all-gather costs half of alpha and of beta;
        only all-reduces and all-gathers gate the forward pass (see the
        simulator).

    Returns:
      The simulator's iteration time (without building a Timeline).
    """
    n = len(groups)
    ready = np.empty(n)
    size = np.empty(n)
    scale = np.ones(n)
    last = np.full(self.num_tensors, -1)
    for k, g in enumerate(groups):
      ready[k] = max(self.ready[t] for t, _, _ in g)
      size[k] = sum(length for _, _, length in g)
      kind = plan_lib.ALL_REDUCE if kinds is None else kinds[k]
      if kind != plan_lib.ALL_REDUCE:
        scale[k] = 0.5
      if kind == plan_lib.REDUCE_SCATTER:
        continue
      for t, _, _ in g:
        last[t] = k
    ends = channel_ends(ready, scale * (self.alpha + self.beta * size))
    return float(max(self.floor, np.max(ends[last] + self.tail), ends[-1]))
