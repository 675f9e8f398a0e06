"""Hand-made plans for tests: fine chunks and fused groups over given shapes."""

import numpy as np

from tf_preempt.plan.plan import PlanTensor
from tf_preempt.plan.plan import plan_from_groups
from tf_preempt.plan.plan import split_evenly


def plan_tensors(shapes, itemsize=4):
  """One `PlanTensor` per shape, named t0, t1, ..."""
  return [PlanTensor(f"t{i}", int(np.prod(s)) * itemsize, itemsize)
          for i, s in enumerate(shapes)]


def chunked_plan(shapes, chunk_bytes, itemsize=4):
  """Every tensor cut into `chunk_bytes` chunks, interleaved forward-first."""
  tensors = plan_tensors(shapes, itemsize)
  chunks = [[(i, off, n)] for i, t in enumerate(tensors)
            for off, n in split_evenly(t.nbytes, itemsize, chunk_bytes)]
  return plan_from_groups(tensors, chunks[::2] + chunks[1::2])


def fused_plan(shapes, itemsize=4):
  """Two fused groups that split tensor 4 across them (needs 7 shapes)."""
  tensors = plan_tensors(shapes, itemsize)
  half = tensors[4].nbytes // 2 // itemsize * itemsize
  first = [(i, 0, tensors[i].nbytes) for i in (0, 2, 3)] + [(4, 0, half)]
  second = ([(4, half, tensors[4].nbytes - half)] +
            [(i, 0, tensors[i].nbytes) for i in (1, 5, 6)])
  return plan_from_groups(tensors, [second, first])
