"""Made-up benchmark records for tests of `tf_preempt.bench`'s readers.

Chrome trace events as the bench runtime writes them (compute blocks and
collectives with their `iteration`, `bytes` and `ready_ns`), lines of
`scripts/bench_arrival_order.py --json`, machine lines, and the times of
collectives timed alone that the execution model gives. Pure Python; the
planner on first use.
"""

import json


def collective(iteration, cid, nbytes, ready_us, start_us, dur_us):
  """A traced collective: its step, id, bytes, ready time, start, length."""
  return {"name": f"collective {cid}", "cat": "collective", "ph": "X",
          "pid": 0, "tid": 1 + cid % 2, "ts": start_us, "dur": dur_us,
          "args": {"iteration": iteration, "collective_id": cid,
                   "bytes": nbytes, "ready_ns": int(ready_us * 1e3)}}


def block(index, start_us, dur_us):
  """A traced compute block (of K steps)."""
  return {"name": f"block {index}", "cat": "compute", "ph": "X", "pid": 1,
          "tid": 0, "ts": start_us, "dur": dur_us}


def trace(blocks, collectives):
  """Worker 0's trace of a vgg_small run of 2 workers, global batch 8."""
  return {"traceEvents": blocks + collectives, "otherData": {"origin_ns": 0},
          "metadata": {"stats": {"model": "vgg_small", "workers": 2,
                                 "global_batch_size": 8}}}


def skewed_trace_pair(traces_dir, stem, late_us_by_batch, nbytes=1 << 20,
                      collective_us=30_000.0, unroll=1):
  """Writes worker 0's and 1's traces of row `stem` into `traces_dir` (a
  pathlib.Path): one block per batch (its last step), worker 0 starting it
  late_us_by_batch[batch] after worker 1; one collective of `nbytes` per
  block, in its first step (of `unroll`), 50 ms into it, `collective_us`
  long on each worker (so as long from the last arrival)."""
  for task in (0, 1):
    events = []
    for i, (batch, late_us) in enumerate(sorted(late_us_by_batch.items())):
      start = i * 100_000.0 + (late_us if task == 0 else 0.0)
      events.append({"name": f"block {batch}", "cat": "compute", "ph": "X",
                     "ts": start, "dur": 90_000.0, "args": {"batch": batch}})
      events.append(collective(batch - (unroll - 1), 0, nbytes,
                               start + 50_000, start + 50_000,
                               collective_us))
    (traces_dir / f"{stem}.worker-{task}.json").write_text(
        json.dumps(trace(events, [])))


def machine_line(kernel="fc-v1272"):
  """A `tf_preempt.bench.runner.machine()` line of an AMD EPYC VM whose
  kernel build is `kernel` (what tells this testbed's machines apart)."""
  return (f"vm: AMD EPYC, 2 cores (shared), Linux 6.18.44-{kernel}, Python "
          "3.11.7, tensorflow-cpu 2.21.0")


def arrival_run(bandwidth, nbytes, task0_ms, nobody_ms, task1_ms=None,
                **extra):
  """One line of scripts/bench_arrival_order.py --json (task 1 late as
  nobody unless `task1_ms`)."""
  return dict({"bandwidth": bandwidth, "nbytes": nbytes, "late_ms": 4.0,
               "by_late_task": {
                   "nobody": {"steps": 29, "from_last_ms": nobody_ms},
                   "task 0": {"steps": 21, "from_last_ms": task0_ms},
                   "task 1": {"steps": 20, "from_last_ms": (
                       nobody_ms if task1_ms is None else task1_ms)}}},
              **extra)


def repeated_samples(cost, burst, cpu, sizes):
  """Seconds of a collective of each size repeated alone, as the execution
  model gives them on a link of `burst` seconds of tokens."""
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  model = execution.ExecutionModel(cpu=cpu, link_burst=burst)
  return [execution.repeated_seconds(cost, s, model) for s in sizes]
