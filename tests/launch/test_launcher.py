"""Tests of tf_preempt.launch.launcher, including a real TensorFlow cluster."""

import json
import os
import sys
import textwrap

import pytest

from tf_preempt.launch import launcher
from tf_preempt.launch import netem
from tf_preempt.launch import processes

# One MultiWorkerMirroredStrategy all-reduce of a constant; worker i
# contributes i + 1, so with 2 workers every worker must see 1 + 2 = 3.
_ALL_REDUCE = textwrap.dedent("""
    import json, os, time
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    start = time.perf_counter()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    @tf.function
    def reduce():
      ctx = tf.distribute.get_replica_context()
      return ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                            tf.fill([4], float(task + 1)))

    values = strategy.experimental_local_results(strategy.run(reduce))
    print(json.dumps({"task": task,
                      "sum": [float(v) for v in values[0].numpy()],
                      "replicas": strategy.num_replicas_in_sync,
                      "seconds": time.perf_counter() - start}))
""")


def test_worker_specs():
  addresses = ["127.0.0.1:1000", "127.0.0.1:1001"]
  specs = launcher.worker_specs(
      ["prog", "--flag"], addresses, intra_op_threads=1,
      extra_env={"A": "b"}, prefixes=[["pre0"], ["pre1"]])
  for i, spec in enumerate(specs):
    config = json.loads(spec.env["TF_CONFIG"])
    assert config == {"cluster": {"worker": addresses},
                      "task": {"type": "worker", "index": i}}
    assert spec.argv == ["prog", "--flag"]
    assert spec.prefix == [f"pre{i}"]
    assert spec.env["A"] == "b"
    assert spec.env["TF_NUM_INTRAOP_THREADS"] == "1"
    assert spec.name == f"worker-{i}"
  cpus = processes.assign_cpus(2)
  assert [s.cpus for s in specs] == (cpus or [None, None])
  unpinned = launcher.worker_specs(["prog"], addresses, pin_cpus=False)
  assert [s.cpus for s in unpinned] == [None, None]


def test_worker_specs_rejects_bad_input():
  with pytest.raises(ValueError, match="no command"):
    launcher.worker_specs([], ["127.0.0.1:1"])
  with pytest.raises(ValueError, match="duplicate address"):
    launcher.worker_specs(["p"], ["127.0.0.1:1", "127.0.0.1:1"])
  with pytest.raises(ValueError, match="num_workers"):
    launcher.launch(["true"], 0)


def test_local_worker_specs_use_free_loopback_ports():
  specs = launcher.local_worker_specs(["prog"], 3)
  cluster = json.loads(specs[0].env["TF_CONFIG"])["cluster"]["worker"]
  assert len(set(cluster)) == 3
  assert all(a.startswith("127.0.0.1:") for a in cluster)


@pytest.mark.slow
def test_multi_worker_all_reduce_on_loopback_and_emulated(tmp_path):
  script = tmp_path / "all_reduce.py"
  script.write_text(_ALL_REDUCE)
  command = [sys.executable, str(script)]
  support = netem.check_available()
  runs = [("loopback", None)]
  if support.namespaces and support.rate:
    # Latency only where netem exists; see netem.check_available().
    runs.append(("emulated", netem.LinkConfig(
        rate="2gbit", latency="200us" if support.delay else None)))
  for name, link in runs:
    result = launcher.launch(command, 2, timeout_s=150, link=link,
                             log_dir=str(tmp_path / name))
    tails = [w.tail() for w in result.group.workers]
    assert result.exit_code == 0, (name, tails)
    for i, worker in enumerate(result.group.workers):
      assert worker.stats == {"task": i, "sum": [3.0] * 4, "replicas": 2,
                              "seconds": worker.stats["seconds"]}, name
    print(f"{name} ({link.describe() if link else 'loopback'}): "
          f"{result.group.elapsed_s:.1f} s")
    if link is not None:
      assert all(a.startswith(netem.DEFAULT_SUBNET + ".")
                 for a in result.addresses)
  assert os.path.isdir(tmp_path / "loopback")
  assert netem.list_namespaces(f"{netem.NAMESPACE_BASE}-{os.getpid()}-") == []
  if len(runs) == 1:
    pytest.skip(f"ran on loopback only; emulation unavailable: "
                f"{' '.join(support.reasons)}")


def test_namespace_order_swaps_where_the_tasks_run(tmp_path):
  support = netem.check_available()
  if not (support.namespaces and support.rate):
    pytest.skip(f"emulation unavailable: {' '.join(support.reasons)}")
  # Each worker prints its task and the address of its own namespace.
  code = ("import json, os, subprocess; "
          "i = json.loads(os.environ['TF_CONFIG'])['task']['index']; "
          "out = subprocess.run(['ip', '-o', '-4', 'addr', 'show', 'eth0'], "
          "capture_output=True, text=True).stdout; "
          "print(json.dumps({'task': i, 'ip': out.split()[3].split('/')[0]}))")
  link = netem.LinkConfig(rate="1gbit")
  result = launcher.launch([sys.executable, "-c", code], 2, timeout_s=60,
                           link=link, namespace_order=[1, 0])
  assert result.exit_code == 0, [w.tail() for w in result.group.workers]
  ips = [w.stats["ip"] for w in result.group.workers]
  # Task 0 has the second namespace's address, in TF_CONFIG and on eth0.
  assert ips == [a.split(":")[0] for a in result.addresses]
  assert ips == [f"{netem.DEFAULT_SUBNET}.2", f"{netem.DEFAULT_SUBNET}.1"]
  with pytest.raises(ValueError, match="needs a link"):
    launcher.launch([sys.executable, "-c", "pass"], 2, namespace_order=[1, 0])
  with pytest.raises(ValueError, match="permutation"):
    launcher.launch([sys.executable, "-c", "pass"], 2, link=link,
                    namespace_order=[0, 0])


def test_launch_for_stats_returns_each_workers_last_json_line():
  code = ("import json, os; i = json.loads(os.environ['TF_CONFIG'])"
          "['task']['index']; print('warming up'); "
          "print(json.dumps({'worker': i, 'median_step_s': 0.5}))")
  stats = launcher.launch_for_stats([sys.executable, "-c", code], 2,
                                    timeout_s=60, **launcher.MEASUREMENT_WORKER)
  assert stats == [{"worker": 0, "median_step_s": 0.5},
                   {"worker": 1, "median_step_s": 0.5}]


def test_launch_for_stats_names_the_failure_and_its_log_tail():
  code = ("import json, os, sys\n"
          "if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 1:\n"
          "  sys.exit('worker one broke')\n"
          "import time; time.sleep(60)\n")
  with pytest.raises(RuntimeError, match=r"(?s)failed \(logs in .*"
                     r"worker one broke"):
    launcher.launch_for_stats([sys.executable, "-c", code], 2, timeout_s=60)
