"""The training DAG of one iteration: compute ops, dependencies, gradients.

Semantics (shared by the simulator and every scheduler):

- One steady-state iteration starts at t=0 with the backward pass. An op
  starts when all of its predecessor ops have ended; compute parallelism is
  unlimited, so this is a pure dependency model and the end time of the
  forward pass is monotone in the reduction end times.
- A tensor's gradient is ready at the end of its producer (a backward op).
- Forward ops belong to the NEXT iteration. Besides their predecessors they
  wait for the end of the whole backward pass (the device is busy until
  then) and for the reduction of every tensor they read.

Edges `(a, b)` mean "b waits for a" and link ops of the same phase only: the
two passes are coupled through the tensors, not through edges.

A tensor may be marked `sparse` (`SparseGradient`): its gradient arrives as
`tf.IndexedSlices` (an embedding's), which the runtime all-gathers after the
dense collectives instead of reducing it as planned. The planner and
`simulator` ignore the mark (they plan and reduce every tensor alike);
`execution` models the all-gather.
"""

import dataclasses
import json
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

_PHASES = ("forward", "backward")


@dataclasses.dataclass(frozen=True)
class Op:
  """A compute op.

  Attributes:
    name: unique name.
    phase: "forward" (of the next iteration) or "backward".
    duration: seconds, finite and >= 0.
  """
  name: str
  phase: str
  duration: float


@dataclasses.dataclass(frozen=True)
class SparseGradient:
  """A gradient that arrives as `tf.IndexedSlices`, per worker and step.

  The runtime all-gathers each worker's rows and their indices (as stock
  TensorFlow does) instead of all-reducing the dense tensor.

  Attributes:
    values_nbytes: bytes of the rows one worker's step produces (rows looked
      up x bytes per row), > 0.
    indices_nbytes: bytes of their indices (rows x the index itemsize), > 0.
  """
  values_nbytes: int
  indices_nbytes: int


@dataclasses.dataclass(frozen=True)
class TensorInfo:
  """A trainable tensor whose gradient is all-reduced.

  Attributes:
    name: unique name.
    nbytes: size in bytes, a positive multiple of itemsize.
    producer: the backward op that produces the gradient.
    consumers: the forward ops (next iteration) that read the tensor.
    itemsize: bytes per element.
    sparse: None for a dense gradient; a `SparseGradient` if the gradient
      is `tf.IndexedSlices` (see the module doc).
  """
  name: str
  nbytes: int
  producer: str
  consumers: Tuple[str, ...]
  itemsize: int = 4
  sparse: Optional[SparseGradient] = None

  def __post_init__(self):
    object.__setattr__(self, "consumers", tuple(self.consumers))


class TrainingDAG:
  """Compute ops of one iteration plus the tensors that link the passes.

  Attributes:
    ops: the ops, as given.
    edges: the (before, after) dependency pairs, as given.
    tensors: the tensors, in the order the gradients are handed to the
      all-reduce (usually the model's variable order, i.e. forward order).
  """

  def __init__(self, ops: Sequence[Op], edges: Sequence[Tuple[str, str]],
               tensors: Sequence[TensorInfo]):
    """Builds and validates a DAG.

    Args:
      ops: compute ops with unique names.
      edges: pairs (a, b): b starts after a ends; same phase.
      tensors: at least one tensor.

    Raises:
      ValueError: naming the offending op or tensor, for duplicate or unknown
        names, bad durations or sizes, cross-phase edges, cycles, tensors
        without a backward producer or with non-forward consumers.
    """
    self.ops = tuple(ops)
    self.edges = tuple((str(a), str(b)) for a, b in edges)
    self.tensors = tuple(tensors)
    self._validate()
    self._index = {op.name: i for i, op in enumerate(self.ops)}
    self._topo = self._topological_order()
    self._cache = {}

  # --- validation ----------------------------------------------------------

  def _validate(self) -> None:
    names = set()
    for op in self.ops:
      if not isinstance(op, Op):
        raise ValueError(f"Not an Op: {op!r}")
      if op.name in names:
        raise ValueError(f"Duplicate op name {op.name!r}.")
      names.add(op.name)
      if op.phase not in _PHASES:
        raise ValueError(f"Op {op.name!r}: phase {op.phase!r} is not one of "
                         f"{_PHASES}.")
      d = op.duration
      if (not isinstance(d, (int, float, np.floating, np.integer)) or
          not math.isfinite(d) or d < 0):
        raise ValueError(f"Op {op.name!r}: duration {d!r} must be finite and "
                         ">= 0.")
    phase = {op.name: op.phase for op in self.ops}
    for a, b in self.edges:
      for n in (a, b):
        if n not in phase:
          raise ValueError(f"Edge ({a!r}, {b!r}) names unknown op {n!r}.")
      if phase[a] != phase[b]:
        raise ValueError(f"Edge ({a!r}, {b!r}) links a {phase[a]} op to a "
                         f"{phase[b]} op; edges must stay within one phase.")
    if not self.tensors:
      raise ValueError("TrainingDAG has no tensors.")
    tnames = set()
    for t in self.tensors:
      if not isinstance(t, TensorInfo):
        raise ValueError(f"Not a TensorInfo: {t!r}")
      if t.name in tnames:
        raise ValueError(f"Duplicate tensor name {t.name!r}.")
      tnames.add(t.name)
      if (not isinstance(t.itemsize, (int, np.integer)) or t.itemsize <= 0):
        raise ValueError(f"Tensor {t.name!r}: itemsize {t.itemsize!r} must be "
                         "a positive integer.")
      if (not isinstance(t.nbytes, (int, np.integer)) or t.nbytes <= 0 or
          t.nbytes % t.itemsize):
        raise ValueError(f"Tensor {t.name!r}: nbytes {t.nbytes!r} must be a "
                         f"positive multiple of itemsize {t.itemsize}.")
      if t.sparse is not None and not (
          isinstance(t.sparse, SparseGradient) and
          all(isinstance(n, (int, np.integer)) and n > 0 for n in
              (t.sparse.values_nbytes, t.sparse.indices_nbytes))):
        raise ValueError(f"Tensor {t.name!r}: sparse={t.sparse!r} must be "
                         "None or a SparseGradient of positive byte counts.")
      if not t.producer:
        raise ValueError(f"Tensor {t.name!r} has no producer.")
      if t.producer not in phase:
        raise ValueError(f"Tensor {t.name!r}: unknown producer "
                         f"{t.producer!r}.")
      if phase[t.producer] != "backward":
        raise ValueError(f"Tensor {t.name!r}: producer {t.producer!r} is not "
                         "a backward op.")
      for c in t.consumers:
        if c not in phase:
          raise ValueError(f"Tensor {t.name!r}: unknown consumer {c!r}.")
        if phase[c] != "forward":
          raise ValueError(f"Tensor {t.name!r}: consumer {c!r} is not a "
                           "forward op.")

  def _topological_order(self) -> List[int]:
    n = len(self.ops)
    succ: List[List[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for a, b in self.edges:
      ia, ib = self._index[a], self._index[b]
      succ[ia].append(ib)
      indeg[ib] += 1
    order = [i for i in range(n) if indeg[i] == 0]
    head = 0
    while head < len(order):
      i = order[head]
      head += 1
      for j in succ[i]:
        indeg[j] -= 1
        if indeg[j] == 0:
          order.append(j)
    if len(order) != n:
      stuck = next(self.ops[i].name for i in range(n) if indeg[i] > 0)
      raise ValueError(f"TrainingDAG has a cycle through op {stuck!r}.")
    return order

  # --- constructors --------------------------------------------------------

  @classmethod
  def chain(cls, forward_s: Sequence[float], backward_s: Sequence[float],
            nbytes: Sequence[int], itemsize: int = 4) -> "TrainingDAG":
    """A sequential model of n layers, one tensor per layer.

    Layer i has forward op "f{i}" reading tensor "t{i}" and backward op
    "b{i}" producing its gradient; f0 -> f1 -> ... and b_{n-1} -> ... -> b0.

    Args:
      forward_s: forward durations, one per layer.
      backward_s: backward durations, one per layer.
      nbytes: tensor sizes, one per layer.
      itemsize: bytes per element of every tensor.

    Returns:
      The DAG.

    Raises:
      ValueError: if the lengths differ or a value is invalid.
    """
    n = len(nbytes)
    if len(forward_s) != n or len(backward_s) != n:
      raise ValueError(f"chain: {len(forward_s)} forward durations, "
                       f"{len(backward_s)} backward durations and {n} sizes "
                       "must have the same length.")
    ops = ([Op(f"f{i}", "forward", float(d)) for i, d in enumerate(forward_s)]
           + [Op(f"b{i}", "backward", float(d))
              for i, d in enumerate(backward_s)])
    edges = ([(f"f{i}", f"f{i + 1}") for i in range(n - 1)] +
             [(f"b{i + 1}", f"b{i}") for i in range(n - 1)])
    tensors = [TensorInfo(f"t{i}", int(s), f"b{i}", (f"f{i}",), itemsize)
               for i, s in enumerate(nbytes)]
    return cls(ops, edges, tensors)

  # --- serialisation -------------------------------------------------------

  def to_dict(self) -> Dict:
    tensors = []
    for t in self.tensors:
      entry = {"name": t.name, "nbytes": t.nbytes, "producer": t.producer,
               "consumers": list(t.consumers), "itemsize": t.itemsize}
      if t.sparse is not None:  # written only when set: old JSON unchanged
        entry["sparse"] = dataclasses.asdict(t.sparse)
      tensors.append(entry)
    return {
        "ops": [[o.name, o.phase, o.duration] for o in self.ops],
        "edges": [list(e) for e in self.edges],
        "tensors": tensors,
    }

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), sort_keys=True)

  @classmethod
  def from_dict(cls, data: Dict) -> "TrainingDAG":
    """Rebuilds a DAG from `to_dict`'s output.

    Raises:
      ValueError: on malformed data or an invalid DAG.
    """
    try:
      ops = [Op(str(n), str(p), float(d)) for n, p, d in data["ops"]]
      edges = [(str(a), str(b)) for a, b in data["edges"]]
      tensors = [TensorInfo(str(t["name"]), int(t["nbytes"]),
                            str(t["producer"]),
                            tuple(str(c) for c in t["consumers"]),
                            int(t.get("itemsize", 4)),
                            None if t.get("sparse") is None else
                            SparseGradient(
                                int(t["sparse"]["values_nbytes"]),
                                int(t["sparse"]["indices_nbytes"])))
                 for t in data["tensors"]]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise ValueError(f"Not a valid TrainingDAG: {type(e).__name__}: {e}"
                       ) from e
    return cls(ops, edges, tensors)

  @classmethod
  def from_json(cls, text: str) -> "TrainingDAG":
    """Parses `to_json`'s output.

    Raises:
      ValueError: on malformed JSON or an invalid DAG.
    """
    try:
      data = json.loads(text)
    except json.JSONDecodeError as e:
      raise ValueError(f"TrainingDAG JSON is malformed: {e}") from e
    if not isinstance(data, dict):
      raise ValueError("TrainingDAG JSON must be an object.")
    return cls.from_dict(data)

  # --- timing --------------------------------------------------------------

  def op_index(self, name: str) -> int:
    return self._index[name]

  def predecessors(self) -> List[List[int]]:
    """Per op, the indices of the ops it waits for."""
    if "pred" not in self._cache:
      pred: List[List[int]] = [[] for _ in self.ops]
      for a, b in self.edges:
        pred[self._index[b]].append(self._index[a])
      self._cache["pred"] = pred
    return self._cache["pred"]

  def topological_order(self) -> List[int]:
    return list(self._topo)

  def backward_times(self) -> Tuple[np.ndarray, np.ndarray]:
    """Start and end of every op when the backward pass starts at t=0.

    Forward ops are left at 0; see `simulator.simulate` for their times.
    """
    if "bwd" not in self._cache:
      start = np.zeros(len(self.ops))
      end = np.zeros(len(self.ops))
      pred = self.predecessors()
      for i in self._topo:
        if self.ops[i].phase != "backward":
          continue
        s = max((end[j] for j in pred[i]), default=0.0)
        start[i] = s
        end[i] = s + self.ops[i].duration
      self._cache["bwd"] = (start, end)
    return self._cache["bwd"]

  def backward_end(self) -> float:
    """End of the backward pass: the last backward op's end (0 if none)."""
    _, end = self.backward_times()
    ends = [end[i] for i, o in enumerate(self.ops) if o.phase == "backward"]
    return float(max(ends, default=0.0))

  def ready_times(self) -> np.ndarray:
    """Per tensor (in `tensors` order), the end time of its producer."""
    _, end = self.backward_times()
    return np.array([end[self._index[t.producer]] for t in self.tensors])

  def forward_tails(self) -> np.ndarray:
    """Per op, the longest forward path starting at it, its duration included.

    Zero for backward ops.
    """
    if "tail" not in self._cache:
      tail = np.zeros(len(self.ops))
      succ: List[List[int]] = [[] for _ in self.ops]
      for a, b in self.edges:
        succ[self._index[a]].append(self._index[b])
      for i in reversed(self._topo):
        if self.ops[i].phase != "forward":
          continue
        tail[i] = self.ops[i].duration + max((tail[j] for j in succ[i]),
                                             default=0.0)
      self._cache["tail"] = tail
    return self._cache["tail"]

  def forward_length(self) -> float:
    """The longest path of the forward pass (0 without forward ops)."""
    return float(max(self.forward_tails(), default=0.0))

  def tensor_tails(self) -> np.ndarray:
    """Per tensor, q_p: the longest forward path starting at a consumer.

    The forward pass cannot end before C_p + q_p when tensor p is reduced at
    C_p; a tensor nobody reads has q_p = 0.
    """
    tail = self.forward_tails()
    return np.array([max((tail[self._index[c]] for c in t.consumers),
                         default=0.0) for t in self.tensors])

  def __repr__(self) -> str:
    return (f"TrainingDAG({len(self.ops)} ops, {len(self.edges)} edges, "
            f"{len(self.tensors)} tensors)")
