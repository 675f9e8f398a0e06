"""Binding a plan to the values handed to an all-reduce.

A `Plan` names tensors by position and size; the runtime receives a flat list
of gradients. Binding checks that the two match (position, dtype, shape) and
turns the plan into `BoundPlan.steps`: one step per collective, each a tuple of
element ranges of the flat values. Values the plan cannot cut at fixed offsets
are routed around it:

- `IndexedSlices` are all-gathered, as stock TensorFlow does; their pieces are
  dropped from the collectives they were planned into.
- Dense tensors of unknown static shape get one collective of their own,
  issued where the plan first touched them (warned about once per name).
- Tensors with zero elements need no collective at all.

All of this is a pure function of the values' static signature, so every
worker derives the same steps from the same plan.
"""

import collections
import dataclasses
from typing import List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from tf_preempt.plan.plan import Plan
from tf_preempt.plan.plan import PlanTensor

# A dense tensor of unknown size takes part whole: its piece has no length.
WHOLE = None

_warned_unknown_shape = set()


@dataclasses.dataclass(frozen=True)
class ValueSpec:
  """The static signature of one value handed to the all-reduce.

  Attributes:
    name: a name for messages (the graph tensor's name, or "value[i]").
    dtype: the `tf.DType`.
    shape: the static `tf.TensorShape` (of the dense value, or of the
      `IndexedSlices`' dense shape when known).
    sparse: whether the value is `tf.IndexedSlices`.
  """
  name: str
  dtype: tf.DType
  shape: tf.TensorShape
  sparse: bool = False

  @property
  def num_elements(self) -> Optional[int]:
    return self.shape.num_elements()

  @property
  def known(self) -> bool:
    return self.shape.is_fully_defined()

  def key(self) -> Tuple:
    """A hashable form of the signature (for caches), without the name."""
    dims = None if self.shape.rank is None else tuple(self.shape.as_list())
    return (self.dtype.name, dims, self.sparse)


def spec_of(value, index: int) -> ValueSpec:
  """Returns the `ValueSpec` of a tensor or `IndexedSlices`."""
  name = f"value[{index}]"
  if not tf.executing_eagerly():
    name = getattr(value, "name", name) or name
  if isinstance(value, tf.IndexedSlices):
    shape = tf.TensorShape(None)
    dense_shape = tf.get_static_value(value.dense_shape) if (
        value.dense_shape is not None) else None
    if dense_shape is not None:
      shape = tf.TensorShape([int(d) for d in dense_shape])
    return ValueSpec(name, value.dtype, shape, sparse=True)
  return ValueSpec(name, value.dtype, value.shape, sparse=False)


@dataclasses.dataclass(frozen=True)
class BoundPlan:
  """A plan bound to one list of values.

  Attributes:
    plan: the plan, its tensors carrying the dtype and shape they were bound
      to (so its fingerprint covers them), or None if no value needed one.
    flat_index: for each plan tensor, the position of its value.
    steps: one tuple per collective, in issue order, of
      (value position, element offset, element count or WHOLE).
    sparse: positions of `IndexedSlices` values (all-gathered).
    passthrough: positions of zero-element values (nothing to reduce).
  """
  plan: Optional[Plan]
  flat_index: Tuple[int, ...]
  steps: Tuple[Tuple[Tuple[int, int, Optional[int]], ...], ...]
  sparse: Tuple[int, ...] = ()
  passthrough: Tuple[int, ...] = ()


def _describe(spec: ValueSpec) -> str:
  return (f"{spec.name!r} ({'IndexedSlices' if spec.sparse else 'Tensor'}, "
          f"dtype {spec.dtype.name}, shape {spec.shape})")


def _warn_unknown_shape(spec: ValueSpec) -> None:
  if spec.name not in _warned_unknown_shape:
    _warned_unknown_shape.add(spec.name)
    logging.warning(
        "tf_preempt: %s has no static shape, so the plan cannot cut it at "
        "fixed offsets; it is all-reduced by a collective of its own.",
        _describe(spec))


def check_user_plan(plan) -> None:
  """Checks that `plan` is one the runtime can execute (None passes).

  Raises:
    TypeError: if it is not a `Plan`.
    ValueError: if it is not all-reduce only: reduce-scatter/all-gather
      plans (the planner's "pace_rsag") are simulation only, and lowering
      them to all-reduces would reduce the wrong bytes.
  """
  if plan is None:
    return
  if not isinstance(plan, Plan):
    raise TypeError(f"plan must be a tf_preempt Plan, got {type(plan)}.")
  if not plan.is_all_reduce:
    kinds = sorted({c.kind for c in plan.collectives})
    raise ValueError(
        f"The runtime executes all-reduce plans only; this {plan.scheduler!r} "
        f"plan has collectives of kinds {kinds} (a simulation-only "
        "reduce-scatter/all-gather split).")


def bind_plan(plan: Plan, specs: Sequence[ValueSpec]) -> BoundPlan:
  """Binds a plan made for these values by position, dtype and shape.

  Args:
    plan: a `Plan` whose tensors are the values, in order.
    specs: the `ValueSpec` of each value.

  Returns:
    A `BoundPlan` whose plan carries each tensor's dtype and shape.

  Raises:
    ValueError: naming the first value that does not fit the plan, or the
      first collective that would fuse values of different dtypes.
  """
  check_user_plan(plan)
  if len(plan.tensors) != len(specs):
    first = min(len(plan.tensors), len(specs))
    extra = (f"value {first} {_describe(specs[first])} is not in the plan"
             if first < len(specs) else
             f"plan tensor {first} {plan.tensors[first].name!r} has no value")
    raise ValueError(
        f"The plan was made for {len(plan.tensors)} tensors but "
        f"{len(specs)} values were given: {extra}.")
  tensors = []
  for i, (pt, spec) in enumerate(zip(plan.tensors, specs)):
    tensors.append(_bind_tensor(i, pt, spec))
  bound = dataclasses.replace(plan, tensors=tuple(tensors))
  _check_collective_dtypes(bound)
  return _lower(bound, tuple(range(len(specs))), specs)


def _bind_tensor(i: int, pt: PlanTensor, spec: ValueSpec) -> PlanTensor:
  """Checks one value against its plan tensor; returns the tensor bound."""
  def mismatch(what):
    return ValueError(
        f"The plan does not fit value {i} {_describe(spec)}: plan tensor "
        f"{pt.name!r} {what}.")

  if pt.dtype is not None and tf.as_dtype(pt.dtype) != spec.dtype:
    raise mismatch(f"has dtype {pt.dtype}")
  if pt.itemsize != spec.dtype.size:
    raise mismatch(f"has itemsize {pt.itemsize}, but {spec.dtype.name} "
                   f"elements are {spec.dtype.size} bytes")
  if pt.shape is not None and not spec.shape.is_compatible_with(pt.shape):
    raise mismatch(f"has shape {list(pt.shape)}")
  if spec.known and spec.num_elements * spec.dtype.size != pt.nbytes:
    raise mismatch(f"has {pt.nbytes} bytes, but the value has "
                   f"{spec.num_elements * spec.dtype.size}")
  shape = pt.shape
  if shape is None and spec.known:
    shape = tuple(spec.shape.as_list())
  return dataclasses.replace(pt, dtype=spec.dtype.name, shape=shape)


def _check_collective_dtypes(plan: Plan) -> None:
  for c, coll in enumerate(plan.collectives):
    dtypes = {plan.tensors[t].dtype for t in coll.tensors}
    if len(dtypes) > 1:
      names = [f"{plan.tensors[t].name!r} ({plan.tensors[t].dtype})"
               for t in coll.tensors]
      raise ValueError(
          f"Plan collective {c} fuses tensors of different dtypes: "
          f"{', '.join(names)}. tf_preempt never casts gradients; make one "
          f"plan per dtype group (the default plans do).")


def _lower(plan: Optional[Plan], flat_index: Tuple[int, ...],
           specs: Sequence[ValueSpec],
           unplanned: Sequence[int] = ()) -> BoundPlan:
  """Turns a bound plan into element-range steps over the flat values.

  Args:
    plan: the bound plan (tensors carry dtypes), or None.
    flat_index: plan tensor position -> value position.
    specs: the signature of every value.
    unplanned: dense values of unknown shape that the plan does not name;
      each gets a collective of its own after the plan's.

  Returns:
    The `BoundPlan`.
  """
  sparse = tuple(i for i, s in enumerate(specs) if s.sparse)
  passthrough = tuple(i for i, s in enumerate(specs)
                      if not s.sparse and s.known and s.num_elements == 0)
  steps: List[Tuple[Tuple[int, int, Optional[int]], ...]] = []
  whole_done = set()
  if plan is not None:
    for coll in plan.collectives:
      step = []
      for piece in coll.pieces:
        pos = flat_index[piece.tensor]
        spec = specs[pos]
        if spec.sparse or pos in passthrough:
          continue
        if not spec.known:
          # Cut nowhere: one collective for the whole tensor, issued where
          # the plan first needed it.
          if pos not in whole_done:
            whole_done.add(pos)
            _warn_unknown_shape(spec)
            if step:
              steps.append(tuple(step))
              step = []
            steps.append(((pos, 0, WHOLE),))
          continue
        itemsize = plan.tensors[piece.tensor].itemsize
        step.append((pos, piece.offset // itemsize, piece.length // itemsize))
      if step:
        steps.append(tuple(step))
  for pos in unplanned:
    if pos not in whole_done:
      _warn_unknown_shape(specs[pos])
      steps.append(((pos, 0, WHOLE),))
  return BoundPlan(plan=plan, flat_index=tuple(flat_index),
                   steps=tuple(steps), sparse=sparse, passthrough=passthrough)


def plannable(specs: Sequence[ValueSpec]) -> List[int]:
  """Positions of the values a plan can cut: dense, known, non-empty."""
  return [i for i, s in enumerate(specs)
          if not s.sparse and s.known and s.num_elements > 0]


def bind_default(plan: Optional[Plan], positions: Sequence[int],
                 specs: Sequence[ValueSpec]) -> BoundPlan:
  """Binds a plan made for a subset of the values (see `default_plan`).

  Args:
    plan: a plan over `specs[p] for p in positions`, in that order, or None
      if there is nothing to plan.
    positions: the value positions the plan's tensors stand for.
    specs: the signature of every value.

  Returns:
    The `BoundPlan`; dense values of unknown shape are appended as
    collectives of their own.
  """
  if plan is not None:
    tensors = tuple(_bind_tensor(i, pt, specs[p]) for i, (pt, p) in
                    enumerate(zip(plan.tensors, positions)))
    plan = dataclasses.replace(plan, tensors=tensors)
    _check_collective_dtypes(plan)
  unknown = [i for i, s in enumerate(specs) if not s.sparse and not s.known]
  return _lower(plan, tuple(positions), specs, unplanned=unknown)


def group_by_dtype(positions: Sequence[int], specs: Sequence[ValueSpec]
                   ) -> "collections.OrderedDict[tf.DType, List[int]]":
  """Splits positions into dtype groups, in order of first appearance."""
  groups = collections.OrderedDict()
  for p in positions:
    groups.setdefault(specs[p].dtype, []).append(p)
  return groups
