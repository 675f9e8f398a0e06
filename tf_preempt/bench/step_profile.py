r"""Profiles a model's training step: per-layer times and its early work.

  python -m tf_preempt.bench.step_profile --model transformer_tiny \
      --batch_size 32

One process, no strategy: the model's forward pass, loss, gradients and SGD
update in one `tf.function` on a synthetic batch, run under TensorFlow's
profiler. It runs one op at a time on one thread (inter- and intra-op), so
that ops do not overlap and each one's profiled time is its own; pin it to
one core as the benchmark's workers are (`scripts/bench_step_profile.py`
does). Two things are read off the profile:

- Per-layer times: each op's time goes to the layer whose name scope it is
  in, forward or backward ("gradient_tape/..."), under the op names of
  `tf_preempt.profile.model_to_dag` ("LAYER/forward", "LAYER/backward");
  ops of no layer (the loss, the optimizer) are left out. Measured per-op
  times of this machine's CPU, where the DAG's own are a GPU FLOPs model.
- Early work: the ops of the step's graph that descend from no trainable
  variable (dropout's random masks: they read only the seed generator's
  state). In an unrolled block of K steps TensorFlow runs them for every
  step as soon as the block starts, without waiting for the previous
  step's updates (`tf_preempt.plan.execution.ExecutionModel.
  early_compute`). Their share of all ops' profiled time is the result.

Prints one JSON line: {"model", "per_worker_batch", "early_share",
"early_ms", "ops_ms" (profiled, per step), "step_ms" (median unprofiled
step), "early_ops" (the early ops' names, most time first, with ms),
"unmatched_ms" (profiled ops the graph does not name: grappler's rewrites,
counted as weight-dependent), "layer_ms" ({DAG op name: profiled ms per
step}), "layer_share" (the share of all ops' profiled time the layers
hold), "threads"}.
"""

import collections
import glob
import json
import os
import re
import statistics
import tempfile
import time
from typing import Dict, Iterable, Optional, Sequence, Set

from absl import app
from absl import flags

_TOP_OPS = 12


def define_flags() -> None:
  """The worker's flags."""
  flags.DEFINE_string("model", "transformer_tiny", "Model of the registry.")
  flags.DEFINE_integer("batch_size", 32, "The batch of one worker.")
  flags.DEFINE_integer("steps", 20, "Steps timed, and as many profiled.")
  flags.DEFINE_integer("threads", 1, "Inter- and intra-op threads.")


def weight_free_ops(graph, weight_inputs: Iterable[str]) -> Set[str]:
  """Names of `graph`'s ops that no op in `weight_inputs` reaches.

  Args:
    graph: a `tf.Graph` (a function's graph).
    weight_inputs: names of the ops that stand for the trainable variables
      (the placeholders of their captured handles).

  Returns:
    The names of the ops with no path, through data or control edges, from
    any of `weight_inputs` (those excluded).
  """
  consumers = collections.defaultdict(list)
  operations = graph.get_operations()
  for op in operations:
    for tensor in op.inputs:
      consumers[tensor.op.name].append(op.name)
    for control in op.control_inputs:
      consumers[control.name].append(op.name)
  reached = set(weight_inputs)
  stack = list(reached)
  while stack:
    for name in consumers[stack.pop()]:
      if name not in reached:
        reached.add(name)
        stack.append(name)
  return {op.name for op in operations if op.name not in reached}


def read_profile(log_dir: str):
  """The newest profile under `log_dir`, as an `XSpace` proto.

  Args:
    log_dir: the directory given to `tf.profiler.experimental.start`.

  Returns:
    The parsed `tensorflow.tsl.profiler.protobuf.xplane_pb2.XSpace`.

  Raises:
    FileNotFoundError: if the directory holds no profile.
  """
  # pylint: disable=g-import-not-at-top
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  # pylint: enable=g-import-not-at-top
  paths = sorted(glob.glob(os.path.join(log_dir, "plugins", "profile", "*",
                                        "*.xplane.pb")))
  if not paths:
    raise FileNotFoundError(f"no profile (*.xplane.pb) under {log_dir}")
  space = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    space.ParseFromString(f.read())
  return space


def profiled_op_seconds(log_dir: str) -> Dict[str, float]:
  """{op name: seconds} summed over the TensorFlow ops of a profile.

  Args:
    log_dir: the directory given to `tf.profiler.experimental.start`.

  Returns:
    Seconds per graph op name, from the executor threads' op events
    ("name:type"), over everything profiled.

  Raises:
    FileNotFoundError: if the directory holds no profile.
  """
  space = read_profile(log_dir)
  seconds = collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith("tf_"):
        continue  # the Python thread's eager calls, not graph ops
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        # Op events are "name:type"; the executor's own are "Class::Method".
        if ":" in name and "::" not in name:
          seconds[name.split(":")[0]] += event.duration_ps * 1e-12
  return dict(seconds)


def layer_seconds(op_seconds: Dict[str, float], model_scope: str,
                  layers: Iterable[str]) -> Dict[str, float]:
  """Seconds per DAG op ("LAYER/forward" or "LAYER/backward").

  Args:
    op_seconds: {graph op name: seconds}, as `profiled_op_seconds` gives.
    model_scope: the model's name (its name scope, maybe with a "_N"
      suffix, is each op name's first part).
    layers: the layer names the DAG knows.

  Returns:
    The seconds of the ops inside each layer's name scope (the scope of a
    layer's call is its name, maybe with a "_N" suffix), forward, or
    backward under "gradient_tape/"; ops outside every layer are left out.
  """
  known = set(layers)
  out = collections.Counter()
  for name, seconds in op_seconds.items():
    phase = "forward"
    if name.startswith("gradient_tape/"):
      phase, name = "backward", name[len("gradient_tape/"):]
    parts = name.split("/")
    if len(parts) < 3 or re.sub(r"_\d+$", "", parts[0]) != model_scope:
      continue
    layer = parts[1] if parts[1] in known else re.sub(r"_\d+$", "",
                                                      parts[1])
    if layer in known:
      out[f"{layer}/{phase}"] += seconds
  return dict(out)


def _train_step(model_name: str, batch_size: int):
  """(the step's tf.function, its arguments, the model)."""
  # pylint: disable=g-import-not-at-top
  import keras
  import tensorflow as tf
  from tf_preempt.models import registry
  from tf_preempt.training import data
  # pylint: enable=g-import-not-at-top
  model = registry.get(model_name)
  optimizer = keras.optimizers.SGD(0.01)
  loss_fn = keras.losses.SparseCategoricalCrossentropy()
  # The training binary's synthetic examples (token ids for a model that
  # reads them).
  spec = data.input_spec_of(model)
  examples = [data.synthetic_example(spec, 0, i) for i in range(batch_size)]
  inputs = tf.stack([x for x, _ in examples])
  labels = tf.stack([y for _, y in examples])

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  return step, (inputs, labels), model


def measure(model_name: str, batch_size: int, steps: int,
            threads: Optional[int] = 1) -> Dict:
  """The step profile of one model (the module doc's JSON line).

  Args:
    model_name: a model of `tf_preempt.models.registry`.
    batch_size: the batch of one worker.
    steps: steps timed, and as many profiled.
    threads: TensorFlow's inter- and intra-op threads, set here (before
      TensorFlow has run anything in this process); None leaves them.

  Returns:
    The record.

  Raises:
    RuntimeError: if the step's graph does not capture every trainable
      variable's handle.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tf_preempt import profile as profile_lib
  # pylint: enable=g-import-not-at-top
  if threads is not None:
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
  step, args, model = _train_step(model_name, batch_size)
  weights = model.trainable_variables
  layers = {op.name.rsplit("/", 1)[0] for op in profile_lib.model_to_dag(
      model, batch_size=batch_size).ops}
  graph = step.get_concrete_function(*args).graph
  handles = {id(getattr(v, "value", v).handle) for v in weights}
  weight_inputs = [internal.op.name for external, internal in graph.captures
                   if id(external) in handles]
  if len(weight_inputs) != len(weights):
    raise RuntimeError(f"found {len(weight_inputs)} of the {len(weights)} "
                       "trainable variables among the step's captures")
  early = weight_free_ops(graph, weight_inputs)
  known = {op.name for op in graph.get_operations()}
  for _ in range(5):  # warm-up: tracing, grappler, allocations
    step(*args).numpy()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step(*args).numpy()
    times.append(time.perf_counter() - start)
  with tempfile.TemporaryDirectory() as log_dir:
    tf.profiler.experimental.start(log_dir)
    for _ in range(steps):
      step(*args).numpy()
    tf.profiler.experimental.stop()
    seconds = profiled_op_seconds(log_dir)
  total = sum(seconds.values())
  early_s = {n: s for n, s in seconds.items() if n in early}
  unmatched = sum(s for n, s in seconds.items() if n not in known)
  top = sorted(early_s.items(), key=lambda item: -item[1])[:_TOP_OPS]
  per_layer = layer_seconds(seconds, model.name, layers)
  return {"model": model_name, "per_worker_batch": batch_size,
          "early_share": sum(early_s.values()) / total if total else 0.0,
          "early_ms": sum(early_s.values()) / steps * 1e3,
          "ops_ms": total / steps * 1e3,
          "step_ms": statistics.median(times) * 1e3,
          "early_ops": [[n, s / steps * 1e3] for n, s in top],
          "unmatched_ms": unmatched / steps * 1e3,
          "layer_ms": {n: s / steps * 1e3 for n, s in sorted(
              per_layer.items())},
          "layer_share": sum(per_layer.values()) / total if total else 0.0,
          "threads": threads}


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  record = measure(f.model, f.batch_size, f.steps, f.threads)
  print(json.dumps(record), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
