"""Tests of TrainingDAG: validation, chain, JSON, timing."""

import math

import numpy as np
import pytest

from tf_preempt.plan import Op
from tf_preempt.plan import SparseGradient
from tf_preempt.plan import TensorInfo
from tf_preempt.plan import TrainingDAG


def _ops():
  return [Op("f0", "forward", 1.0), Op("f1", "forward", 2.0),
          Op("b0", "backward", 1.0), Op("b1", "backward", 3.0)]


def _tensors():
  return [TensorInfo("t0", 8, "b0", ("f0",)), TensorInfo("t1", 4, "b1", ("f1",))]


_EDGES = [("f0", "f1"), ("b1", "b0")]


@pytest.mark.parametrize("ops,edges,tensors,name", [
    (_ops() + [Op("f0", "forward", 1.0)], _EDGES, _tensors(), "f0"),
    (_ops(), _EDGES + [("f1", "f0")], _tensors(), "f"),
    (_ops(), _EDGES + [("f0", "nope")], _tensors(), "nope"),
    (_ops() + [Op("neg", "forward", -1.0)], _EDGES, _tensors(), "neg"),
    (_ops() + [Op("nan", "forward", math.nan)], _EDGES, _tensors(), "nan"),
    (_ops() + [Op("inf", "backward", math.inf)], _EDGES, _tensors(), "inf"),
    (_ops(), _EDGES, [], "no tensors"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("zero", 0, "b0", ())], "zero"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("odd", 6, "b0", ())], "odd"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("orphan", 4, "", ())],
     "orphan"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("lost", 4, "bx", ())], "bx"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("fwdp", 4, "f0", ())], "f0"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("bwdc", 4, "b0", ("b1",))],
     "b1"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("unk", 4, "b0", ("fz",))],
     "fz"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("t0", 4, "b0", ())], "t0"),
    (_ops(), _EDGES + [("f0", "b0")], _tensors(), "b0"),
    (_ops() + [Op("x", "sideways", 1.0)], _EDGES, _tensors(), "x"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("sp0", 4, "b0", (),
                                              sparse=SparseGradient(0, 4))],
     "sp0"),
    (_ops(), _EDGES, _tensors() + [TensorInfo("spt", 4, "b0", (),
                                              sparse=(4, 4))], "spt"),
])
def test_validation_names_the_culprit(ops, edges, tensors, name):
  with pytest.raises(ValueError, match=name):
    TrainingDAG(ops, edges, tensors)


def test_cycle_names_an_op():
  ops = _ops() + [Op("f2", "forward", 1.0)]
  with pytest.raises(ValueError, match="cycle through op 'f"):
    TrainingDAG(ops, _EDGES + [("f1", "f2"), ("f2", "f1")], _tensors())


def test_chain_structure_and_times():
  dag = TrainingDAG.chain([1, 2, 3], [4, 5, 6], [4, 8, 12])
  assert [t.name for t in dag.tensors] == ["t0", "t1", "t2"]
  assert ("b2", "b1") in dag.edges and ("f0", "f1") in dag.edges
  # Backward: b2 [0,6], b1 [6,11], b0 [11,15].
  np.testing.assert_allclose(dag.ready_times(), [15, 11, 6])
  assert dag.backward_end() == 15
  np.testing.assert_allclose(dag.tensor_tails(), [6, 5, 3])
  assert dag.forward_length() == 6


def test_chain_rejects_length_mismatch():
  with pytest.raises(ValueError, match="same length"):
    TrainingDAG.chain([1], [1, 2], [4, 4])


def test_json_round_trip():
  dag = TrainingDAG(_ops(), _EDGES, _tensors())
  back = TrainingDAG.from_json(dag.to_json())
  assert back.ops == dag.ops and back.edges == dag.edges
  assert back.tensors == dag.tensors
  # A sparse mark round-trips and is written only when set.
  assert "sparse" not in dag.to_json()
  sparse = TrainingDAG(_ops(), _EDGES, [
      TensorInfo("t0", 8, "b0", ("f0",), sparse=SparseGradient(16, 8)),
      _tensors()[1]])
  assert TrainingDAG.from_json(sparse.to_json()).tensors == sparse.tensors
  with pytest.raises(ValueError):
    TrainingDAG.from_json("{")
  with pytest.raises(ValueError):
    TrainingDAG.from_json('{"ops": []}')
