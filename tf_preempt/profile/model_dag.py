"""Turns a built Keras functional model into the planner's `TrainingDAG`.

Ops. Every call of a layer (a node of the Keras functional graph) that does
work becomes one forward op "<layer>/forward" and one backward op
"<layer>/backward"; a layer called k > 1 times (shared weights) gets ops
"<layer>@0/forward" ... "<layer>@{k-1}/forward". Input layers and layers that
only change a tensor's metadata (Flatten, Reshape) do no work: they are
contracted, their predecessors are linked to their successors.

Edges follow the functional graph: the forward edge (a, b) for every tensor
that call a feeds to call b, so residual branches and attention are DAGs, not
chains. Backward edges are the forward edges reversed (the gradient of a
consumer call flows into the gradient of its producer call).

Tensors. One per trainable variable, in `model.trainable_variables` order,
named by the variable's path, with nbytes = elements * itemsize of its
dtype. Its consumers are the forward ops of the calls of the layer that owns
it; its producer is the backward op of that layer's call that comes first in
the forward order, since that call's backward runs last. For a shared layer,
the other calls' backward ops get an edge into the producer, so the gradient
is ready only when every call has added its part.

Sparse gradients. The weights of `keras.layers.Embedding` layers (read by a
gather, nothing else) get `tf.IndexedSlices` gradients, which the runtime
all-gathers instead of all-reducing. Such a tensor carries a
`SparseGradient`: per worker and step, the rows looked up (batch_size x the
ids of one example, summed over the layer's calls) times the bytes of a row,
and as many indices of the ids' dtype (int64 ids stay int64; Keras casts
any other dtype to int32).

Durations. A roofline estimate per call: the forward pass takes

    max(flops / (peak_flops * efficiency),
        bytes_moved / (memory_bandwidth * efficiency))

where `flops` counts the multiply-adds of convolutions, dense layers and
attention (2 per multiply-add) and a few per element for element-wise layers,
and `bytes_moved` is the inputs, outputs and weights read or written once.
Convolutions and dense layers are compute-bound on a GPU; batch norm, ReLU,
adds and pooling are memory-bound, which the second term captures. The
backward pass costs `backward_ratio` (2 by default) times the forward pass:
one pass for the gradient of the inputs, one for that of the weights. A
call skips a pass autodiff does not run: a layer without trainable weights
(activations, pooling, dropout) or with only a sparse gradient (an
`Embedding`'s is the incoming gradient as `tf.IndexedSlices`, no kernel)
has no weight gradient to compute, and a call none of whose inputs depends
on a trainable weight (the first convolution, reading the model's inputs
or a fixed preprocessing layer; the embedding lookup; a layer behind an
integer output such as an argmax) none of its inputs'; a call with only
integer outputs, and an `Add` layer or `keras.ops.add` (it passes its
incoming gradient on unchanged), do no backward work. A nested model, one
call here, keeps both passes if it has trainable weights. The
efficiency (0.4 by default) is the fraction of peak that framework kernels
reach on average; it is a stand-in for measurement, and measured per-op
seconds can replace any estimate (`profile`, e.g. from `load_profile`).
"""

import dataclasses
import json
import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import keras
import numpy as np

from tf_preempt.plan.dag import Op
from tf_preempt.plan.dag import SparseGradient
from tf_preempt.plan.dag import TensorInfo
from tf_preempt.plan.dag import TrainingDAG


@dataclasses.dataclass(frozen=True)
class GpuSpec:
  """The numbers of a GPU that the roofline estimate needs.

  Attributes:
    description: the product the numbers are for.
    peak_flops: dense float32 peak, FLOP/s.
    peak_flops_half: float16/bfloat16 peak (tensor cores where present),
      FLOP/s; used for layers that compute in a 16-bit dtype.
    memory_bandwidth: device memory bandwidth, bytes/s.
  """
  description: str
  peak_flops: float
  peak_flops_half: float
  memory_bandwidth: float


# Vendor data-sheet numbers (boost clocks). The PACE paper's testbed and
# most all-reduce scheduling papers use V100s.
GPU_SPECS: Dict[str, GpuSpec] = {
    "v100": GpuSpec("NVIDIA Tesla V100 SXM2", 15.7e12, 125e12, 900e9),
    "p100": GpuSpec("NVIDIA Tesla P100 SXM2", 10.6e12, 21.2e12, 732e9),
    "a100": GpuSpec("NVIDIA A100 SXM4", 19.5e12, 312e12, 1555e9),
    "t4": GpuSpec("NVIDIA T4", 8.1e12, 65e12, 320e9),
    "k80": GpuSpec("NVIDIA Tesla K80 (one of its two GPUs)", 4.37e12,
                   4.37e12, 240e9),
    "rtx2080ti": GpuSpec("NVIDIA GeForce RTX 2080 Ti", 13.4e12, 53.8e12,
                         616e9),
}

# Average fraction of peak compute and bandwidth that framework kernels reach.
DEFAULT_EFFICIENCY = 0.4
# Backward / forward time: the input gradient and the weight gradient each
# cost about one forward pass.
DEFAULT_BACKWARD_RATIO = 2.0

FORWARD = "forward"
BACKWARD = "backward"

# Layers that only relabel a tensor's shape: no kernel runs, no op is made.
_NO_WORK_LAYERS = ("InputLayer", "Flatten", "Reshape", "Identity")

# FLOPs per output element of element-wise layers, by class name: batch
# norm in training mode computes mean, variance, normalises, scales and
# shifts; softmax exponentiates, sums and divides. Others default to 1.
_ELEMENTWISE_FLOPS = {
    "BatchNormalization": 8,
    "LayerNormalization": 8,
    "GroupNormalization": 8,
    "Softmax": 5,
    "Dropout": 2,
}


def gpu_spec(gpu: str) -> GpuSpec:
  """Looks up a GPU by name.

  Raises:
    ValueError: if the name is unknown; the message lists the valid names.
  """
  spec = GPU_SPECS.get(gpu.lower())
  if spec is None:
    raise ValueError(f"Unknown GPU {gpu!r}; valid names: "
                     f"{', '.join(sorted(GPU_SPECS))}.")
  return spec


def load_profile(path: str) -> Dict[str, float]:
  """Reads measured per-op seconds from a JSON file `{op_name: seconds}`.

  Args:
    path: the file.

  Returns:
    The op name -> seconds mapping.

  Raises:
    ValueError: if the file is not a JSON object of non-negative, finite
      numbers (the message names the file and the bad entry).
    OSError: if the file cannot be read.
  """
  with open(path) as f:
    try:
      data = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"Profile {path}: malformed JSON: {e}") from e
  if not isinstance(data, dict):
    raise ValueError(f"Profile {path}: expected a JSON object "
                     "{op_name: seconds}.")
  out = {}
  for name, seconds in data.items():
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or
        not math.isfinite(seconds) or seconds < 0):
      raise ValueError(f"Profile {path}: op {name!r} has {seconds!r} seconds; "
                       "expected a finite number >= 0.")
    out[str(name)] = float(seconds)
  return out


@dataclasses.dataclass(frozen=True)
class CallCost:
  """The per-example forward cost of one layer call.

  Attributes:
    flops: floating-point operations per example.
    activation_bytes: bytes of inputs and outputs per example.
    weight_bytes: bytes of the layer's weights (read once per batch).
    half: whether the layer computes in a 16-bit dtype.
  """
  flops: float
  activation_bytes: float
  weight_bytes: float
  half: bool


@dataclasses.dataclass(eq=False)  # compared and hashed by identity
class _Call:
  """One call of a layer in the model graph: a future pair of ops."""
  layer: keras.Operation
  node: object  # keras Node
  name: str = ""
  order: int = 0


def _elements(shape) -> int:
  """Elements of one example of a symbolic shape (batch dimension dropped)."""
  dims = tuple(shape)[1:]
  if any(d is None for d in dims):
    raise ValueError(f"Shape {tuple(shape)} has an unknown non-batch "
                     "dimension; the FLOPs estimate needs static shapes "
                     "(build the model with a fixed input size).")
  return int(np.prod(dims, dtype=np.int64)) if dims else 1


def _itemsize(dtype) -> int:
  return int(np.dtype(keras.backend.standardize_dtype(dtype)).itemsize)


def _weight_bytes(layer) -> int:
  return sum(_elements((None,) + tuple(v.shape)) * _itemsize(v.dtype)
             for v in getattr(layer, "weights", ()))


def _multi_head_attention_flops(layer, inputs, output) -> float:
  """Projections, scores, softmax, weighted sum and output projection."""
  query = inputs[0]
  value = inputs[1] if len(inputs) > 1 else inputs[0]
  key = inputs[2] if len(inputs) > 2 else value
  lq, dq = _elements(query.shape[:-1]), query.shape[-1]
  lk, dk_in = _elements(key.shape[:-1]), key.shape[-1]
  lv, dv_in = _elements(value.shape[:-1]), value.shape[-1]
  heads, key_dim = layer.num_heads, layer.key_dim
  value_dim = layer.value_dim or key_dim
  d_out = output.shape[-1]
  return 2.0 * (lq * dq * heads * key_dim        # query projection
                + lk * dk_in * heads * key_dim   # key projection
                + lv * dv_in * heads * value_dim  # value projection
                + lq * lk * heads * key_dim      # scores q.k
                + lq * lv * heads * value_dim    # attention-weighted values
                + lq * heads * value_dim * d_out  # output projection
                ) + 5.0 * heads * lq * lk        # softmax


def _einsum_multiply_adds(layer, x, out) -> float:
  """Multiply-adds of an EinsumDense call, per example.

  An einsum does one multiply-add per combination of its distinct indices;
  the batch index (unknown size) is left out.
  """
  equation = layer.equation.replace(" ", "")
  if "..." not in equation:
    lhs, _ = equation.split("->")
    x_spec, kernel_spec = lhs.split(",")
    sizes = dict(zip(x_spec, x.shape))
    sizes.update(zip(kernel_spec, layer.kernel.shape))
    return float(np.prod([d for d in sizes.values() if d is not None],
                         dtype=np.float64))
  # With an ellipsis: each output element contracts over the input's last
  # dimension, the common case of EinsumDense.
  return float(_elements(out.shape) * x.shape[-1])


def _layer_flops(layer, inputs, outputs) -> float:
  """Forward FLOPs of one call, per example."""
  kind = type(layer).__name__
  out = outputs[0]
  out_elems = sum(_elements(o.shape) for o in outputs)
  if isinstance(layer, keras.Model) and hasattr(layer, "_nodes_by_depth"):
    # A nested functional model: the sum of its own calls.
    return sum(_layer_flops(c.layer, _node_inputs(c.node),
                            c.node.outputs) for c in _calls(layer))
  if isinstance(layer, keras.layers.MultiHeadAttention):
    return _multi_head_attention_flops(layer, inputs, out)
  if isinstance(layer, keras.layers.DepthwiseConv2D):
    kh, kw = layer.kernel_size
    return 2.0 * out_elems * kh * kw
  if isinstance(layer, keras.layers.SeparableConv2D):
    kh, kw = layer.kernel_size
    in_channels = inputs[0].shape[-1]
    spatial = out_elems // out.shape[-1]
    return 2.0 * spatial * in_channels * layer.depth_multiplier * (
        kh * kw + out.shape[-1])
  if kind.startswith("Conv") and kind.endswith("Transpose"):
    # Every input element is scattered through the kernel to each filter.
    in_elems = sum(_elements(i.shape) for i in inputs)
    return 2.0 * in_elems * int(np.prod(layer.kernel_size)) * layer.filters
  if hasattr(layer, "kernel_size") and hasattr(layer, "filters"):
    # Conv1D/2D/3D and their transposes: one multiply-add per kernel tap,
    # input channel (of the group) and output element.
    in_channels = inputs[0].shape[-1 if getattr(
        layer, "data_format", "channels_last") == "channels_last" else 1]
    groups = getattr(layer, "groups", 1) or 1
    taps = int(np.prod(layer.kernel_size))
    return 2.0 * out_elems * taps * in_channels / groups
  if isinstance(layer, keras.layers.Dense):
    return 2.0 * out_elems * inputs[0].shape[-1]
  if isinstance(layer, keras.layers.EinsumDense):
    return 2.0 * _einsum_multiply_adds(layer, inputs[0], out)
  if isinstance(layer, keras.layers.Embedding):
    return float(out_elems)  # a gather: memory-bound, see activation bytes
  if kind.endswith("Pooling1D") or kind.endswith("Pooling2D") or (
      kind.endswith("Pooling3D")):
    if kind.startswith("Global"):
      return float(sum(_elements(i.shape) for i in inputs))
    return float(out_elems * int(np.prod(layer.pool_size)))
  per_element = _ELEMENTWISE_FLOPS.get(kind, 1)
  return float(per_element * max(out_elems, sum(
      _elements(i.shape) for i in inputs)))


def call_cost(layer, inputs: Sequence, outputs: Sequence) -> CallCost:
  """Estimates the forward cost of one call of `layer`, per example.

  Args:
    layer: a Keras layer or operation.
    inputs: the symbolic input tensors of the call.
    outputs: the symbolic output tensors of the call.

  Returns:
    The call's `CallCost`.

  Raises:
    ValueError: if a non-batch dimension is unknown.
  """
  compute_dtype = getattr(layer, "compute_dtype", None) or "float32"
  act_itemsize = _itemsize(compute_dtype)
  act_elements = (sum(_elements(t.shape) for t in inputs) +
                  sum(_elements(t.shape) for t in outputs))
  return CallCost(
      flops=_layer_flops(layer, inputs, outputs),
      activation_bytes=float(act_elements * act_itemsize),
      weight_bytes=float(_weight_bytes(layer)),
      half=act_itemsize == 2)


def _node_inputs(node) -> List:
  return list(node.arguments.keras_tensors)


def _calls(model) -> List[_Call]:
  """The model's layer calls in a topological (forward) order."""
  # Keras' private map of the functional graph: nodes by depth, where depth
  # 0 holds the output nodes; deepest first is a topological order.
  nodes_by_depth = model._nodes_by_depth  # pylint: disable=protected-access
  calls = []
  for depth in sorted(nodes_by_depth, reverse=True):
    for node in nodes_by_depth[depth]:
      calls.append(_Call(layer=node.operation, node=node))
  return calls


def _parents(node) -> List:
  """The nodes whose outputs this node reads, in the order it reads them."""
  # pylint: disable=protected-access
  parents = []
  for kt in node.arguments.keras_tensors:
    history = kt._keras_history
    if history.operation is not None:
      parents.append(history.operation._inbound_nodes[history.node_index])
  return parents


def model_to_dag(model: keras.Model,
                 batch_size: int = 32,
                 gpu: str = "v100",
                 efficiency: float = DEFAULT_EFFICIENCY,
                 backward_ratio: float = DEFAULT_BACKWARD_RATIO,
                 profile: Optional[Mapping[str, float]] = None
                 ) -> TrainingDAG:
  """Builds the planner's DAG of one training iteration of `model`.

  See the module docstring for the ops, edges, tensors and durations.

  Args:
    model: a built Keras functional (or Sequential) model with static
      non-batch shapes.
    batch_size: examples per worker per step; scales the estimates.
    gpu: a key of `GPU_SPECS`, the device the estimate is for.
    efficiency: fraction of peak compute and bandwidth reached, in (0, 1].
    backward_ratio: backward / forward duration of a call that computes both
      an input and a weight gradient, > 0; half of it per pass (see the
      module docstring for the calls that skip one or both).
    profile: measured seconds by op name; they replace the estimates of the
      ops they name.

  Returns:
    A validated `TrainingDAG`.

  Raises:
    ValueError: for a model that is not functional, an unknown GPU, bad
      numbers, profile entries naming no op (the message lists some valid
      names), or trainable variables no layer of the graph owns.
  """
  # A built Sequential model keeps its graph in a functional model inside.
  graph = getattr(model, "_functional", None) or model
  if not hasattr(graph, "_nodes_by_depth"):
    raise ValueError(f"model_to_dag needs a functional Keras model; "
                     f"{type(model).__name__} {model.name!r} has no graph "
                     "(build subclassed models with the functional API, or "
                     "call a Sequential model on an Input first).")
  if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
    raise ValueError(f"batch_size={batch_size!r} must be a positive integer.")
  if not 0 < efficiency <= 1:
    raise ValueError(f"efficiency={efficiency!r} must be in (0, 1].")
  if not backward_ratio > 0:
    raise ValueError(f"backward_ratio={backward_ratio!r} must be > 0.")
  spec = gpu_spec(gpu)

  calls = _calls(graph)
  by_node = {id(c.node): c for c in calls}
  # Calls of no-work layers are contracted: they pass their own parents on.
  kept = [c for c in calls if type(c.layer).__name__ not in _NO_WORK_LAYERS]
  per_layer: Dict[int, List[_Call]] = {}
  for c in kept:
    per_layer.setdefault(id(c.layer), []).append(c)
  for order, c in enumerate(kept):
    c.order = order
    siblings = per_layer[id(c.layer)]
    c.name = (c.layer.name if len(siblings) == 1 else
              f"{c.layer.name}@{siblings.index(c)}")

  def working_parents(node, seen=None) -> List[_Call]:
    """The kept calls a node waits for, looking through contracted ones."""
    out = []
    for parent in _parents(node):
      call = by_node.get(id(parent))
      if call is None:  # outside this model's graph
        continue
      if call.name:
        out.append(call)
      else:
        out.extend(working_parents(parent))
    return out

  owners = _variable_owners(kept)
  sparse = {id(v): _sparse_gradient(v, owners[id(v)], batch_size)
            for v in model.trainable_variables if id(v) in owners}
  dense_owners = {id(c) for v in model.trainable_variables
                  if id(v) in owners and sparse[id(v)] is None
                  for c in owners[id(v)]}
  # Calls whose (floating-point) output depends on a trainable weight:
  # only through them does autodiff compute a gradient of the inputs.
  # `kept` is topological.
  weight_dependent = set()
  ops, edges = [], []
  for c in kept:
    cost = call_cost(c.layer, _node_inputs(c.node), c.node.outputs)
    peak = spec.peak_flops_half if cost.half else spec.peak_flops
    forward_s = max(
        cost.flops * batch_size / (peak * efficiency),
        (cost.activation_bytes * batch_size + cost.weight_bytes) /
        (spec.memory_bandwidth * efficiency))
    parents = list(dict.fromkeys(working_parents(c.node), None))
    input_gradient = any(id(p) in weight_dependent for p in parents)
    passes = _backward_passes(c, input_gradient, id(c) in dense_owners)
    if _differentiable(c) and (input_gradient or
                               _trainable_weights(c.layer)):
      weight_dependent.add(id(c))
    ops.append(Op(f"{c.name}/{FORWARD}", FORWARD, forward_s))
    ops.append(Op(f"{c.name}/{BACKWARD}", BACKWARD,
                  forward_s * backward_ratio * passes / 2))
    for p in parents:
      edges.append((f"{p.name}/{FORWARD}", f"{c.name}/{FORWARD}"))
      edges.append((f"{c.name}/{BACKWARD}", f"{p.name}/{BACKWARD}"))

  tensors = _tensors(model, owners, sparse, edges)

  if profile:
    names = {op.name for op in ops}
    unknown = sorted(set(profile) - names)
    if unknown:
      raise ValueError(
          f"Profile names {len(unknown)} op(s) the model does not have, e.g. "
          f"{unknown[:3]}; op names look like {sorted(names)[:3]}.")
    ops = [Op(op.name, op.phase, float(profile.get(op.name, op.duration)))
           for op in ops]
  return TrainingDAG(ops, edges, tensors)


def _trainable_weights(layer) -> Sequence:
  """A layer's trainable weights; none for an operation (`keras.ops`)."""
  return getattr(layer, "trainable_weights", None) or ()


def _differentiable(call: _Call) -> bool:
  """Whether a gradient can flow back into the call: not into an integer
  output (argmax, a cast)."""
  return any(keras.backend.is_float_dtype(
      keras.backend.standardize_dtype(t.dtype)) for t in call.node.outputs)


def _variable_owners(kept: Sequence[_Call]) -> Dict[int, List[_Call]]:
  """The calls reading each trainable variable, by the variable's id."""
  owners: Dict[int, List[_Call]] = {}
  for c in kept:
    for v in _trainable_weights(c.layer):
      calls = owners.setdefault(id(v), [])
      if c not in calls:
        calls.append(c)
  return owners


def _backward_passes(call: _Call, input_gradient: bool,
                     weight_gradient: bool) -> int:
  """How many forward-sized passes the call's backward op runs (0-2).

  Args:
    call: the layer call.
    input_gradient: whether an input of the call depends on a trainable
      weight (autodiff computes the inputs' gradient only then).
    weight_gradient: whether the call computes a dense weight gradient.

  Returns:
    0, 1 or 2.
  """
  if not _differentiable(call):
    return 0
  if type(call.layer).__name__ == "Add":  # the layer or keras.ops.add
    # The gradient of a sum is the incoming gradient, for every input.
    return 0
  if weight_gradient and hasattr(call.layer, "_nodes_by_depth"):
    # A nested model is one call: its inner layers after the first compute
    # their inputs' gradient whatever the outer inputs are.
    return 2
  return int(input_gradient) + int(weight_gradient)


def _sparse_gradient(v, calls: Sequence[_Call], batch_size: int
                     ) -> Optional[SparseGradient]:
  """The `SparseGradient` of variable `v`, or None if it is dense.

  Sparse when every call reading `v` is an `Embedding` gathering from it
  (with LoRA or quantisation its `embeddings` is a computed tensor, not
  `v`; a variable also read by any other layer gets a dense sum).
  """
  for c in calls:
    if not isinstance(c.layer, keras.layers.Embedding):
      return None
    try:
      if c.layer.embeddings is not v:
        return None
    except AttributeError:  # not built
      return None
  rows, index_itemsize = 0, 4
  for c in calls:
    ids = _node_inputs(c.node)[0]
    rows += batch_size * _elements(ids.shape)
    if keras.backend.standardize_dtype(ids.dtype) == "int64":
      index_itemsize = 8
  # `_elements` drops the first dimension: what is left is one row.
  row_bytes = _elements(tuple(v.shape)) * _itemsize(v.dtype)
  return SparseGradient(values_nbytes=rows * row_bytes,
                        indices_nbytes=rows * index_itemsize)


def _tensors(model, owners: Dict[int, List[_Call]],
             sparse: Dict[int, Optional[SparseGradient]],
             edges: List[Tuple[str, str]]) -> List[TensorInfo]:
  """One tensor per trainable variable; adds the shared-weight join edges."""
  tensors = []
  for v in model.trainable_variables:
    calls = owners.get(id(v))
    if not calls:
      raise ValueError(f"Trainable variable {v.path!r} belongs to no layer "
                       f"call of model {model.name!r}; model_to_dag cannot "
                       "tell which ops read it.")
    first = min(calls, key=lambda c: c.order)
    producer = f"{first.name}/{BACKWARD}"
    for c in calls:
      if c is not first:
        # The gradient sums every call's part; the first call's backward
        # comes last, so it waits for the others.
        edges.append((f"{c.name}/{BACKWARD}", producer))
    elements = _elements((None,) + tuple(v.shape))
    itemsize = _itemsize(v.dtype)
    tensors.append(TensorInfo(
        name=v.path, nbytes=elements * itemsize, producer=producer,
        consumers=tuple(f"{c.name}/{FORWARD}" for c in calls),
        itemsize=itemsize,
        sparse=sparse[id(v)]))
  # Several join edges can repeat when several variables are shared alike.
  edges[:] = list(dict.fromkeys(edges))
  return tensors


def trainable_bytes(model: keras.Model) -> int:
  """Total bytes of the model's trainable variables."""
  return sum(_elements((None,) + tuple(v.shape)) * _itemsize(v.dtype)
             for v in model.trainable_variables)
