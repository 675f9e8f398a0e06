"""Tests of Plan serialisation, fingerprints and the no-TensorFlow import."""

import os
import subprocess
import sys

from tf_preempt.plan import CostModel
from tf_preempt.plan import Plan
from tf_preempt.plan import make_plan
from tf_preempt.plan import synthetic

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

_FP = """
from tf_preempt.plan import CostModel, make_plan, synthetic
print(make_plan(synthetic.residual(3), CostModel.ring(4, 1.25e9, 2e-5),
                "pace").fingerprint())
"""


def test_json_round_trip():
  plan = make_plan(synthetic.transformer(1), CostModel.ring(4, 1.25e9, 2e-5),
                   "pace")
  back = Plan.from_json(plan.to_json())
  assert back == plan
  assert back.fingerprint() == plan.fingerprint()


def _run(code, seed):
  env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=_REPO)
  return subprocess.run([sys.executable, "-c", code], env=env, check=True,
                        capture_output=True, text=True).stdout.strip()


def test_fingerprint_stable_across_processes():
  here = make_plan(synthetic.residual(3), CostModel.ring(4, 1.25e9, 2e-5),
                   "pace").fingerprint()
  assert _run(_FP, 1) == _run(_FP, 12345) == here


def test_import_does_not_load_tensorflow():
  out = _run("import sys, tf_preempt.plan; "
             "print(any(m == 'tensorflow' or m.startswith('tensorflow.') "
             "for m in sys.modules))", 0)
  assert out == "False"
