"""The train-function calls of a TensorFlow profile (`XSpace`) and their ops.

`tf.profiler.experimental` records, on the host CPU plane, one line per
thread: the Python thread's line (named after the program) holds an
`EagerKernelExecute` event per eager call of a function (a training
block), and the executor's threads' lines ("tf_...") hold an event per op
run ("name scope/op name:OpType"). `train_calls` pairs them up: per
top-level call, the ops that started inside it. Pure Python over the
proto; `step_profile.read_profile` reads one from disk.
"""

import bisect
import dataclasses
from typing import Iterator, List, Tuple

# The Python thread's event of an eager call of a function (the block).
CALL_EVENT = "EagerKernelExecute"
# Executor threads' line names start with this.
EXECUTOR_LINE_PREFIX = "tf_"


@dataclasses.dataclass(frozen=True)
class Call:
  """One top-level call of a function and the ops run inside it.

  Attributes:
    start_ns: the call's start, ns on the profile's clock.
    end_ns: its end.
    ops: (name, start ns, end ns) of every executor op that started in
      [start_ns, end_ns], by start.
  """
  start_ns: int
  end_ns: int
  ops: Tuple[Tuple[str, int, int], ...]


def host_plane(space):
  """The host CPU plane of a profile.

  Args:
    space: an `XSpace`.

  Returns:
    Its "/host:CPU" plane.

  Raises:
    ValueError: if the profile has none.
  """
  planes = [p for p in space.planes if p.name == "/host:CPU"]
  if not planes:
    raise ValueError("the profile has no /host:CPU plane")
  return planes[0]


def events(plane, line) -> Iterator[Tuple[str, int, int]]:
  """The events of one line (thread) of a plane.

  Args:
    plane: an `XPlane` (its event metadata names the events).
    line: one of its lines.

  Yields:
    (name, start ns, end ns) of each event, in the line's order.
  """
  for event in line.events:
    start = line.timestamp_ns + event.offset_ps // 1000
    yield (plane.event_metadata[event.metadata_id].name, start,
           start + event.duration_ps // 1000)


def train_calls(space) -> List[Call]:
  """The top-level eager function calls of `space`, with their ops.

  A call that starts inside the one before is nested in it (a function it
  calls): its ops are that call's, and it is not listed.

  Args:
    space: a profile (`step_profile.read_profile`).

  Returns:
    The calls, by start.

  Raises:
    ValueError: if the profile has no host CPU plane or no eager call.
  """
  plane = host_plane(space)
  starts_ends, ops = [], []
  for line in plane.lines:
    if line.name.startswith(EXECUTOR_LINE_PREFIX):
      ops += list(events(plane, line))
    else:
      starts_ends += [(s, e) for n, s, e in events(plane, line)
                      if n == CALL_EVENT]
  if not starts_ends:
    raise ValueError(f"the profile has no eager call ({CALL_EVENT})")
  ops.sort(key=lambda o: o[1])
  op_starts = [o[1] for o in ops]
  calls, last_end = [], None
  for start, end in sorted(starts_ends):
    if last_end is not None and start < last_end:
      continue
    last_end = end
    calls.append(Call(start, end, tuple(
        ops[bisect.bisect_left(op_starts, start):
            bisect.bisect_right(op_starts, end)])))
  return calls
