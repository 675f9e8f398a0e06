"""Hand-made TensorFlow profiles (`XSpace` protos) for parser tests."""

from typing import Sequence, Tuple

_PS_PER_MS = 10**9


def fake_profile(calls: Sequence[Tuple[float, float]],
                 ops: Sequence[Tuple[str, float, float]],
                 plane_name: str = "/host:CPU",
                 program_ops: Sequence[Tuple[str, float, float]] = ()):
  """A profile as `tf.profiler.experimental` lays one out.

  Args:
    calls: (start ms, end ms) of each eager function call, on the
      program's (Python) thread.
    ops: (name, start ms, end ms) of ops on an executor thread.
    plane_name: the plane's name.
    program_ops: more events (name, start ms, end ms) on the program's
      thread.

  Returns:
    The `XSpace`.
  """
  # pylint: disable=g-import-not-at-top
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  # pylint: enable=g-import-not-at-top
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name=plane_name)

  def add(line, name, start, end):
    meta_id = len(plane.event_metadata) + 1
    plane.event_metadata[meta_id].id = meta_id
    plane.event_metadata[meta_id].name = name
    line.events.add(metadata_id=meta_id, offset_ps=int(start * _PS_PER_MS),
                    duration_ps=int((end - start) * _PS_PER_MS))

  program = plane.lines.add(name="train.py", timestamp_ns=0)
  for start, end in calls:
    add(program, "EagerKernelExecute", start, end)
    add(program, "TFE_Py_ExecuteCancelable", start, end)
  for name, start, end in program_ops:
    add(program, name, start, end)
  executor = plane.lines.add(name="tf_Compute/1", timestamp_ns=0)
  for name, start, end in ops:
    add(executor, name, start, end)
  return space
