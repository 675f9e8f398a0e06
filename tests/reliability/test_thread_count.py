"""Training does not pile up threads: no thread per collective by default.

TensorFlow starts a thread per collective launch that sleeps for the
collective's timeout (`Env::SchedClosureAfter`), so with a timeout a job
holds (collectives per second) x (timeout) threads. The runtime therefore
sets no timeout unless asked (dead peers are named by the heartbeat,
test_dead_worker.py). Two runs of a plan of many small collectives on two
workers: the default keeps the thread count flat; a 60 s timeout, the
control, grows it by at least one thread per collective launched, which
shows the count would catch a per-collective thread.
"""

import os

import pytest

from tf_preempt.testing import cluster

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "workers.py")
STEPS = 100
# Threads a process may start or end between two counts for reasons of its
# own (gRPC and tf.data pools growing).
SLACK = 16


@pytest.mark.slow
@pytest.mark.parametrize("timeout_seconds", [None, 60.0])
def test_thread_count_stays_flat_without_a_timeout(timeout_seconds):
  results = cluster.run_workers(f"{WORKERS}:threads_over_steps", 2,
                                args=(STEPS, timeout_seconds), timeout=240,
                                pin_cpus=True)
  cluster.check_all_ok(results)
  for r in results:
    v = r.value
    grown = v["after"] - v["before"]
    print(f"[threads] timeout={timeout_seconds} task={r.task_id} "
          f"collectives/step={v['collectives']} threads {v['before']} -> "
          f"{v['after']} over {STEPS} steps")
    assert v["collectives"] >= 4, v
    if timeout_seconds is None:
      assert grown <= SLACK, v
    else:
      assert grown >= STEPS * v["collectives"], v
