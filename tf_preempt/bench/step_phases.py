"""A training block's phases, from TensorFlow's profile of a worker.

  phases = step_phases.block_phases(step_profile.read_profile(log_dir), 2)

Per profiled block (one call of the train function, `xspace.train_calls`)
of K steps, in milliseconds from the block's start:

- "head_ms": to the end of the first step's loss op (`block_head.
  loss_ends`): the start-up, the forward pass, and whatever else the
  executor ran first.
- "compute_ms": to the end of the last op of a gradient tape: the
  backward pass's end (the step's compute, at K = 1).
- "later_forward_ms": per later step k, from the end of step k-1's update
  of the first trainable variable (the first layer's kernel, or the
  embedding; `FIRST_UPDATE`) to the end of step k's loss op: the part of
  step k's forward pass that waited for the update (all but the work
  that reads no updated weight, which the executor ran earlier). In a
  row that updates every variable at once after one collective
  (tf_default), no later layer waits for a reduction on top.
- "block_ms": its length.

`scripts/bench_step_phases.py` profiles real two-worker runs of the
benchmark to take them. Pure Python over the profile's proto.
"""

import re
from typing import Dict, List, Optional

from tf_preempt.bench import block_head
from tf_preempt.bench import xspace
from tf_preempt.training import config as config_lib

# The training binaries' optimizer: step k of an unrolled block updates
# under "sgd_k/" ("sgd/" for k = 0), stock Keras's K = 1 function under
# "StatefulPartitionedCall/sgd/".
OPTIMIZER_SCOPE = config_lib.OPTIMIZER_NAME
# Under a tf.distribute strategy each variable's update runs in a scope
# "update_N", N the mirrored variable's component (0 with one device per
# worker); TensorFlow makes the repeats unique per variable as
# "update_0_1", "update_0_2", ..., in the order the optimizer applies the
# model's trainable variables (layer order), so "update_0/" itself is the
# first variable's. OneDeviceStrategy opens no such scope: its profiles
# (the block head's) have no later forward to read.
FIRST_UPDATE = "update_0/"
_FIRST_UPDATE_OP = re.compile(
    rf"(?:^|/){OPTIMIZER_SCOPE}(?:_(\d+))?/{re.escape(FIRST_UPDATE)}")
_GRADIENT_TAPE = "gradient_tape/"


def _first_update_ends(call: xspace.Call) -> Dict[int, int]:
  """{step: the end (ns) of its last op updating the first variable}."""
  ends: Dict[int, int] = {}
  for name, _, end in call.ops:
    match = _FIRST_UPDATE_OP.search(name)
    if match:
      step = int(match.group(1) or 0)
      ends[step] = max(end, ends.get(step, end))
  return ends


def block_phases(space, unroll: int) -> List[Dict[str, object]]:
  """The phases of each block of `unroll` steps in a profile.

  Args:
    space: a profile (`step_profile.read_profile`).
    unroll: the steps of each block (K).

  Returns:
    Per call that ran a loss op, in order: {"head_ms", "compute_ms" (None
    without gradient-tape ops), "later_forward_ms" (K - 1 values),
    "block_ms"} (the module doc).

  Raises:
    ValueError: if the profile has no host CPU plane or no eager call, a
      call ran other than `unroll` loss ops, or a later step's loss has
      no update of the first variable before it.
  """
  out = []
  for call, losses in block_head.step_calls(space, unroll):
    ms = lambda t: (t - call.start_ns) * 1e-6  # pylint: disable=cell-var-from-loop
    updates = _first_update_ends(call)
    later = []
    for step in range(1, unroll):
      if step - 1 not in updates or updates[step - 1] > losses[step]:
        raise ValueError(f"step {step}'s loss has no update of the first "
                         f"variable ({OPTIMIZER_SCOPE}.../{FIRST_UPDATE}) "
                         f"of step {step - 1} before it")
      later.append((losses[step] - updates[step - 1]) * 1e-6)
    backward = [e for n, _, e in call.ops if _GRADIENT_TAPE in n]
    compute: Optional[float] = ms(max(backward)) if backward else None
    out.append({"head_ms": ms(losses[0]), "compute_ms": compute,
                "later_forward_ms": later,
                "block_ms": ms(call.end_ns)})
  return out
