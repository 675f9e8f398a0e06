"""Tests of tf_preempt.runtime.failure_detection and the heartbeat set-up."""

import json
import subprocess
import sys

import pytest

from tf_preempt.runtime import failure_detection


@pytest.mark.parametrize("collective_s, heartbeat_s", [
    (None, 10.0), (0, 10.0), (120.0, 10.0), (30.0, 10.0), (20.0, 20 / 3),
    (3.0, 1.0), (1.5, 1.0), (0.1, 1.0),
])
def test_heartbeat_is_a_third_of_the_collective_timeout_within_1_to_10_s(
    collective_s, heartbeat_s):
  assert failure_detection.heartbeat_timeout_s(collective_s) == (
      pytest.approx(heartbeat_s))


def test_negative_timeout_is_refused():
  with pytest.raises(ValueError, match="must be >= 0"):
    failure_detection.heartbeat_timeout_s(-1.0)


# In a fresh process: TensorFlow configures the coordination service once
# per process, before the context is initialized.
_CONFIGURE = r"""
import json, sys
import tensorflow as tf
from tf_preempt.runtime import tf_internals
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    tf.train.ClusterSpec({"worker": ["localhost:1", "localhost:2"]}),
    task_type="worker", task_id=1)
before = tf_internals.configured_heartbeat_timeout_ms()
first = tf_internals.configure_coordination_service(resolver, 2500)
second = tf_internals.configure_coordination_service(resolver, 9000)
from tensorflow.python.eager import context
c = context.context().coordination_service
print(json.dumps({"before": before, "first": first, "second": second,
                  "heartbeat_ms": c.heartbeat_timeout_in_ms,
                  "leader": c.service_leader,
                  "jobs": [(j.name, j.num_tasks) for j in c.coordinated_job_list],
                  "type": c.service_type}))
"""


def test_configures_the_service_as_stock_does_with_the_heartbeat_once():
  out = subprocess.run([sys.executable, "-c", _CONFIGURE], check=True,
                       capture_output=True, text=True, timeout=120).stdout
  got = json.loads(out.strip().splitlines()[-1])
  assert got["before"] is None
  assert got["first"] is True and got["second"] is False
  assert got["heartbeat_ms"] == 2500
  assert got["leader"] == "/job:worker/replica:0/task:0"
  assert got["jobs"] == [["worker", 2]]
  assert got["type"] == "standalone"
