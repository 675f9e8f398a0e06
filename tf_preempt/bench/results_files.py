"""What a `scripts/bench.py` results directory holds, read as plain data.

Its JSON files, worker 0's Chrome traces and their names (row NAME@K ->
NAME_kK.worker-0.json), the flags of its command, and the benchmark's
setup: model, workers, global batch and link. Pure Python.
"""

import glob
import json
import os
import re
from typing import Any, Dict, Optional

from tf_preempt.bench import emulated_link
from tf_preempt.bench.results import split_name


def read_json(path: str) -> Optional[Any]:
  """The JSON document at `path`.

  Args:
    path: a file of the results directory (or of a sibling).

  Returns:
    The parsed document, or None if there is no such file (a benchmark
    need not record every file).
  """
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    return json.load(f)


def worker0_traces(results_dir: str) -> Dict[str, Dict[str, Any]]:
  """Worker 0's Chrome traces of the rows.

  Args:
    results_dir: a `scripts/bench.py` results directory.

  Returns:
    {file name (`trace_name`'s): its trace}, in name order; empty without
    RESULTS_DIR/traces.
  """
  out = {}
  for path in sorted(glob.glob(os.path.join(results_dir, "traces",
                                            "*.worker-0.json"))):
    out[os.path.basename(path)] = read_json(path)
  return out


def trace_name(row: str) -> str:
  """The trace file of row NAME@K on worker 0 (bench.py's naming)."""
  scheduler, unroll = split_name(row)
  return f"{scheduler}_k{unroll}.worker-0.json"


def trace_unroll(trace: str) -> int:
  """K of a trace file named as `trace_name` makes them (1 if unnamed)."""
  match = re.search(r"_k(\d+)\.worker-\d+\.json$", trace)
  return int(match.group(1)) if match else 1


def command_flag(results: Dict[str, Any], name: str, default: str) -> str:
  """The value of --`name` in results.json's bench.py command, or
  `default`."""
  m = re.search(rf"--{name}[= ](\S+)", results.get("command", ""))
  return m.group(1) if m else default


def heap_mode(results: Dict[str, Any]) -> Optional[str]:
  """The `--heap` mode of every process of the benchmark (its machine
  line says it), or None for directories from before `--heap`, whose
  references (communication alone, the probes) ran without TensorFlow's
  mmap threshold and its rows with it."""
  m = re.search(r"; heap (\w+)", results.get("machine", ""))
  return m.group(1) if m else None


def machine_identity(line: Optional[str]) -> Optional[str]:
  """The machine of a `runner.machine()` line: its CPU, cores and OS
  release, without the host name, the versions and a run's load.

  The VMs of this testbed's sessions share a CPU name ("AMD EPYC") but not
  a speed; their kernel build tells them apart (scripts/bench_contention.py's
  chain of 330 x 330 matmuls took about 0.3 ms a matmul under Linux
  6.18.44-fc-v1252 on 4 December, 1.1-1.4 ms under fc-v1272 on 6
  December).

  Args:
    line: a results.json "machine" line or a probe's, or None.

  Returns:
    e.g. "AMD EPYC, 2 cores (shared), Linux 6.18.44-fc-v1272"; None for a
    line without them (probes from before they recorded their machine).
  """
  m = re.match(r"[^:]*: (.+?), Python ", line or "")
  return m.group(1) if m else None


def benchmark_setup(results: Dict[str, Any],
                    traces: Dict[str, Dict[str, Any]],
                    details: Optional[Dict[str, Any]] = None
                    ) -> Dict[str, Any]:
  """Model, workers, global batch, link and host of the benchmark.

  Args:
    results: its results.json.
    traces: its `worker0_traces` (their metadata first), or {}.
    details: its details.json, or None.

  Returns:
    {"model", "workers", "global_batch_size", "source": where they came
    from, "link_rate", "link_bits_per_s", "link_burst_s", "heap": its
    `heap_mode`, "machine": its `machine_identity`,
    "speed_ms_per_matmul": the host's speed reading (scripts/bench.py
    reads it since 6 December, night; None before)}.
  """
  rate = emulated_link.link_rate(results)
  link = {"link_rate": rate,
          "link_bits_per_s": emulated_link.link_bits_per_s(rate or ""),
          "link_burst_s": emulated_link.link_burst_seconds(rate),
          "heap": heap_mode(results),
          "machine": machine_identity(results.get("machine")),
          "speed_ms_per_matmul": (details or {}).get("speed_ms_per_matmul")}
  for trace in traces.values():
    stats = (trace.get("metadata") or {}).get("stats") or {}
    if {"model", "workers", "global_batch_size"} <= set(stats):
      return {"model": stats["model"], "workers": int(stats["workers"]),
              "global_batch_size": int(stats["global_batch_size"]),
              "source": "trace metadata", **link}
  # The defaults of scripts/bench.py.
  return {"model": command_flag(results, "model", "vgg_small"),
          "workers": int(command_flag(results, "workers", "2")),
          "global_batch_size": int(command_flag(results, "batch_size", "48")),
          "source": "results.json command (bench.py defaults where absent)",
          **link}
