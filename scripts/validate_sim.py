r"""Compares the simulator with a measured benchmark, row by row.

Reads a `scripts/bench.py` results directory and, for every scheduler row
NAME@K of its results.json, simulates the plan the row ran as the runtime
executes it (`tf_preempt.plan.execution`) and compares the predicted step
time with the measured median:

    error = (predicted - measured) / measured

Each row also gets the planner's own model (`simulator.simulate`: one
steady-state iteration, one collective at a time, free communication) for
comparison; the error is the execution model's.

The inputs come from the directory, best first; none is the step time of
the row being predicted:

- Per-op times: RESULTS_DIR/profile.json ({op name: seconds}, the format
  of `tf_preempt.profile.load_profile`) if present; otherwise the roofline
  FLOPs model of --gpu for the benchmark's model, scaled so that forward +
  backward equals the measured `compute_s` (the step with no all-reduce),
  with the forward pass stretched or shrunk to the forward share measured
  in the traces (--forward_share, below).
- Cost model of one collective timed alone: RESULTS_DIR/cost_model.json
  ({"alpha", "beta"}) if present; otherwise (--cost_fallback=comm) alpha =
  GRPC_ALPHA_S, the fixed cost of one collective measured alone on this
  testbed, and beta from `comm_s` (all gradient bytes in one all-reduce,
  timed alone); or (--cost_fallback=trace) `CostModel.fit` over the traced
  collectives, whose durations include queueing and contention. On a
  token-bucket link (below) a collective timed alone, back to back, does
  not take `alpha + beta * s` (`execution.repeated_seconds`: the fixed
  cost of a large one hides behind its bytes, a small one's bytes pass in
  a burst), so cost_model.json's samples are refitted with the bucket
  (`fit_alone`) and comm_s gives beta through it; not where the CPU cost
  is the collective's own (the old upper bound below: the bucket cannot
  speed bytes that need the whole core at the rate).
- The link: the rate of the command's --bandwidth (else the "link rate"
  of results.json's machine line) and the burst of the token bucket (tc
  tbf) that `tf_preempt.launch.netem` gives that rate (4 ms of traffic at
  >= 131 Mbit/s: 100 KB at 200 Mbit/s); loopback or an unknown link: a
  plain rate, no bucket.
- Sparse gradients: the DAG's tensors that `model_to_dag` marks sparse
  (Embedding weights, whose gradients are `tf.IndexedSlices`), with their
  rows and indices per worker for the benchmark's per-worker batch. The
  runtime leaves them out of its plans and all-gathers them after each
  step's dense collectives; the traces record only the planned
  collectives. A row run with --sparse_as_dense densified them and
  reduced them as its plan says: no all-gathers (`workers` None).
- The plan of each row: RESULTS_DIR/plans/NAME@K.json (`Plan.to_json`) if
  present and made for the DAG's tensors, or for its dense tensors (the
  runtime plans only those; the sparse ones are appended, one collective
  each, which the execution model replaces by the all-gathers); otherwise
  the plan the runtime makes from the dense gradient sizes alone
  (`tf_preempt.runtime.default_plan`'s chain DAG and nominal ring, rebuilt
  here), or for tf_default/tf_packed the planner's copy of stock
  TensorFlow's packing of the dense gradients.
- The execution model of each row (`ExecutionModel`):
  - unroll: the row's K (blocks of K steps, a barrier between blocks);
  - workers: the benchmark's, for the all-gathers of the sparse
    gradients (none for a --sparse_as_dense row);
  - link_burst: the link's token bucket (above);
  - credit: the row's --credit_collectives / --credit_bytes, else the
    runtime's default on CPUs (2 collectives in flight);
  - CPU cost of a collective on the compute core (--cpu_cost): what a
    concurrent all-reduce took from a chain of matmuls on the worker's
    core, measured on the directory's link by scripts/bench_contention.py
    (the newest CONTENTION_GLOB beside the directory with its rate; 2
    workers); without one, the old upper bound: the cost model of a
    directory whose link is fast enough that communication looked
    CPU-bound (>= 1 Gbit/s; the directory itself, or the fastest such
    sibling with the same worker count), all of a collective's time alone
    there taken as CPU work. On an idle core the fixed CPU work of the
    collectives in flight is served one at a time in release order
    (`fixed_cpu_fifo`; the CPU part below is measured as exactly that);
  - the arrival-order penalty (--order_penalty; 2 workers on an emulated
    link): how much longer a stock all-reduce takes when task 0 reaches
    it last, measured by scripts/bench_arrival_order.py (the newest
    ARRIVAL_ORDER_GLOB beside the directory), against the seconds of
    traffic by which a rank's half exceeds the bucket; weighted by the
    share of blocks task 0 started late (`late_start_share`) in both
    workers' traces of the other rows of the row's K and kind (fused, or
    one collective per tensor: `per_tensor_collectives`);
  - the CPU part of a collective's fixed cost, the share of the core a
    collective's CPU work gets while compute runs (--comm_cpu_share), the
    per-block overhead after the barrier (--block_overhead_ms), the
    block's start-up (--block_startup_ms) and the forward share of
    compute (--forward_share): measured, leave-one-out, from the Chrome
    traces of the directory's OTHER rows (never the predicted row's own),
    and never from a trace whose run was more than 10% slower than its
    row's fastest repeat (a disturbed run: the machine is shared), except
    the small-collective figures below when only disturbed traces have
    them (the row's note says so). The
    CPU part is the median time between the ends of two small
    collectives (<= 64 KiB) in flight together after the backward pass
    (what does not overlap); the share is that CPU part over the median
    duration of the small collectives that ran while the backward pass
    computed (less the latency alpha - CPU part); the overhead is fitted
    to the other rows' block tails (a block's last traced collective to
    its end, less what the row's execution model puts there: `model_tail`,
    the sparse all-gathers, which follow the last dense collective and
    are not traced; 0 without sparse gradients) as a part per K plus a
    part per tensor of the block's last collective (their updates follow
    it: the fused buffer's unpacking, the optimizer), by least absolute
    deviations (`lad_fit`); the start-up (per K) and the forward share
    are fitted the same way to the other rows' block heads (a block's
    start to its first ready gradient), knowing where in the backward
    pass each row's first collective becomes ready (`fit_block_head`,
    `first_ready_fraction`).

The table goes to stdout and to --out (default RESULTS_DIR/validation.md);
`--json` prints one object with per-row errors and `max_abs_error`.

Usage:
  python scripts/validate_sim.py benchmarks/results/2026-12-02-vgg_small-200mbit
  python scripts/validate_sim.py RESULTS_DIR --json
"""

import contextlib
import dataclasses
import glob
import json
import os
import re
import statistics
import sys
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

# Pure Python (no TensorFlow): ("NAME", K) of a results.json row "NAME@K".
from tf_preempt.bench.results import split_name  # pylint: disable=g-import-not-at-top

# The accuracy the issue asks of the simulator.
TARGET_ABS_ERROR = 0.10
# Fixed cost of one gRPC ring all-reduce of a few bytes timed alone on this
# testbed (2 CPU workers; README.md, "measured alpha about 1.8 ms"); used
# only when the directory has no cost_model.json.
GRPC_ALPHA_S = 1.8e-3
# The runtime's credit on CPUs (tf_preempt.runtime.scheduling).
DEFAULT_CREDIT_COLLECTIVES = 2
# Links at least this fast make the gRPC ring CPU-bound on this testbed.
CPU_BOUND_BITS_PER_S = 1e9
# Collectives this small move almost no bytes: their duration while the
# backward pass computes is their fixed cost under contention.
SMALL_COLLECTIVE_BYTES = 64 << 10
# Candidate seconds per tensor of the update work that follows a block's
# last collective (0 to 1 ms, in 10 us steps).
UPDATE_SLOPES_S = [i * 1e-5 for i in range(101)]

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines the script's flags; all optional."""
  flags.DEFINE_string("gpu", "v100", "GPU of the FLOPs model, used only for "
                      "the per-op shape when there is no profile.json.")
  flags.DEFINE_string("out", None, "Markdown table file; default "
                      "RESULTS_DIR/validation.md; empty to write nothing.")
  flags.DEFINE_bool("json", False, "Print one JSON object instead of the "
                    "table.")
  flags.DEFINE_enum("cost_fallback", "comm", ["comm", "trace"],
                    "Cost model without cost_model.json: alpha GRPC_ALPHA_S "
                    "and beta from comm_s, or a fit over the traces.")
  flags.DEFINE_string("cpu_cost", "auto", "CPU cost of a collective: "
                      "'auto', 'none', a cpu_cost.json of "
                      "scripts/bench_contention.py, or a results directory "
                      "/ cost_model.json measured on a CPU-bound link.")
  flags.DEFINE_string("comm_cpu_share", "traces", "'traces' (leave-one-out) "
                      "or a number in (0, 1].")
  flags.DEFINE_float("bytes_cpu_share", 1.0, "Share of the core the "
                     "per-byte CPU work gets while compute runs (1: the "
                     "kernel's network processing preempts the compute).")
  flags.DEFINE_string("block_overhead_ms", "traces", "'traces' "
                      "(leave-one-out) or milliseconds.")
  flags.DEFINE_string("block_startup_ms", "traces", "'traces' "
                      "(leave-one-out, per K) or milliseconds.")
  flags.DEFINE_string("forward_share", "traces", "'traces' (leave-one-out), "
                      "'flops' (the FLOPs model's), or a number in (0, 1).")
  flags.DEFINE_string("order_penalty", "auto", "The penalty of a "
                      "collective that task 0 reaches last: 'auto' (the "
                      f"newest {ARRIVAL_ORDER_GLOB} beside the results "
                      "directory), 'none', or a runs.jsonl of "
                      "scripts/bench_arrival_order.py --json.")
  flags.DEFINE_enum("reference", "median", ["median", "fastest"],
                    "Which repeat to compare with and to take compute "
                    "alone and communication alone from: the median (the "
                    "issue's metric) or the fastest (the least disturbed "
                    "on a shared machine).")


def _read_json(path: str) -> Optional[Any]:
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    return json.load(f)


def trace_name(row: str) -> str:
  """The trace file of row NAME@K on worker 0 (bench.py's naming)."""
  scheduler, unroll = split_name(row)
  return f"{scheduler}_k{unroll}.worker-0.json"


def trace_unroll(trace: str) -> int:
  """K of a trace file named as `trace_name` makes them (1 if unnamed)."""
  match = re.search(r"_k(\d+)\.worker-\d+\.json$", trace)
  return int(match.group(1)) if match else 1


def _worker0_traces(results_dir: str) -> Dict[str, Dict[str, Any]]:
  out = {}
  for path in sorted(glob.glob(os.path.join(results_dir, "traces",
                                            "*.worker-0.json"))):
    out[os.path.basename(path)] = _read_json(path)
  return out


def _setup(results: Dict[str, Any], traces: Dict[str, Dict[str, Any]]
           ) -> Dict[str, Any]:
  """Model, workers, global batch and link of the benchmark."""
  rate = link_rate(results)
  link = {"link_rate": rate, "link_bits_per_s": link_bits_per_s(rate or ""),
          "link_burst_s": link_burst_seconds(rate)}
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


def command_flag(results: Dict[str, Any], name: str, default: str) -> str:
  """The value of --`name` in results.json's bench.py command, or
  `default`."""
  m = re.search(rf"--{name}[= ](\S+)", results.get("command", ""))
  return m.group(1) if m else default


def link_rate(results: Dict[str, Any]) -> Optional[str]:
  """The emulated link's tc rate ("200mbit"), or None (loopback, unknown).

  From the command's --bandwidth, else the results' "machine" line
  ("link rate 200mbit", written by bench.py).
  """
  m = re.search(r"--bandwidth[= ](\S*)", results.get("command", ""))
  if m:
    return m.group(1) or None
  m = re.search(r"\blink rate ([0-9.]+[a-zA-Z]+)", results.get("machine", ""))
  return m.group(1) if m else None


def link_bits_per_s(rate: str) -> Optional[float]:
  """Bits per second of a tc rate ("200mbit", "2gbit"); None if unknown."""
  m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.strip().lower())
  if not m:
    return None
  return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def link_burst_bytes(rate: Optional[str]) -> Optional[int]:
  """The burst of the token bucket (tc tbf) that `tf_preempt.launch.netem`
  gives a link of `rate`, in bytes; None for loopback or a rate it does
  not take."""
  if not rate:
    return None
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  try:
    (tbf,) = netem.tc_commands("ns", "dev", rate, None)
  except ValueError:
    return None
  return int(tbf[tbf.index("burst") + 1])


def link_burst_seconds(rate: Optional[str]) -> float:
  """Seconds of traffic at `rate` that the link's token bucket holds
  (`ExecutionModel.link_burst`); 0 (a plain rate) for loopback or an
  unknown link."""
  burst = link_burst_bytes(rate)
  if burst is None:
    return 0.0
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  return burst / (netem.parse_rate(rate) / 8)


# Where `--order_penalty=auto` looks, beside the results directory.
ARRIVAL_ORDER_GLOB = "*arrival-order*/runs.jsonl"
# Where `--cpu_cost=auto` looks first: scripts/bench_contention.py --out.
CONTENTION_GLOB = "*contention*/cpu_cost.json"


def order_penalty_points(runs: Sequence[Dict[str, Any]]
                         ) -> Tuple[Tuple[float, float], ...]:
  """`ExecutionModel.order_penalty` from scripts/bench_arrival_order.py.

  Args:
    runs: its `--json` lines (two workers). A run on an emulated link with
      the default token bucket and namespaces gives a point: the excess of
      a rank's half of the bytes over the bucket, in seconds of traffic at
      the link's rate, and how much longer the collective took from the
      last arrival when task 0 was late than when nobody was (at least 0).
      Points of one excess (runs of several `late_ms`) are averaged. Only
      runs whose late task slept (`--late_by=sleep`, the default; runs
      from before the flag have no "late_by"): the model applies the
      penalty as that probe measured it, the late task idle; a late task
      that computes 1-2 ms longer costs nothing there.

  Returns:
    The points of positive excess, sorted.
  """
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  by_excess = {}
  for run in runs:
    rate = run.get("bandwidth")
    groups = run.get("by_late_task") or {}
    burst = link_burst_bytes(rate)
    if (burst is None or run.get("burst_bytes") is not None or
        run.get("reverse_namespaces") or
        run.get("late_by", "sleep") != "sleep" or
        not {"task 0", "nobody"} <= set(groups)):
      continue
    excess = (run["nbytes"] / 2 - burst) / (netem.parse_rate(rate) / 8)
    if excess <= 0:
      continue
    penalty = (groups["task 0"]["from_last_ms"] -
               groups["nobody"]["from_last_ms"]) * 1e-3
    by_excess.setdefault(round(excess, 9), []).append(max(0.0, penalty))
  return tuple((x, statistics.fmean(v)) for x, v in sorted(by_excess.items()))


def order_penalty_runs(results_dir: str, source: str
                       ) -> Tuple[List[Dict[str, Any]], str]:
  """The arrival-order runs `--order_penalty` names, and their path.

  Raises:
    ValueError: if `source` is a path that does not exist.
  """
  if source == "none":
    return [], "none"
  if source == "auto":
    parent = os.path.dirname(os.path.abspath(results_dir))
    found = sorted(glob.glob(os.path.join(parent, ARRIVAL_ORDER_GLOB)))
    if not found:
      return [], f"none: no {ARRIVAL_ORDER_GLOB} beside the directory"
    source = found[-1]
  if not os.path.isfile(source):
    raise ValueError(f"order_penalty={source!r}: no such file")
  with open(source) as f:
    runs = [json.loads(line) for line in f if line.strip()]
  return runs, os.path.relpath(
      source, os.path.dirname(os.path.abspath(results_dir)))


def late_starts(results_dir: str, traces: Dict[str, Dict[str, Any]],
                first_step: int) -> Dict[str, Tuple[int, int, int]]:
  """Per two-worker trace pair: (K, blocks task 0 started late
  (`timeline.LATE_START_S` after task 1), blocks), from `first_step` on.

  Args:
    results_dir: the results directory (worker 1's traces are read here).
    traces: worker 0's traces by file name (`_worker0_traces`).
    first_step: the warm-up left out.
  """
  from tf_preempt.bench import timeline  # pylint: disable=g-import-not-at-top
  out = {}
  for name, trace in sorted(traces.items()):
    other = os.path.join(results_dir, "traces",
                         name.replace(".worker-0.", ".worker-1."))
    peer = _read_json(other)
    if peer is None or os.path.isfile(other.replace(".worker-1.",
                                                    ".worker-2.")):
      continue
    k = trace_unroll(name)
    blocks = timeline.block_skews([trace, peer], first_step=first_step,
                                  unroll=k)
    if blocks:
      out[name] = (k, timeline.late_start_counts(blocks)[0], len(blocks))
  return out


def late_start_share(counts: Dict[str, Tuple[int, int, int]],
                     trace_names: Collection[str], unroll: int
                     ) -> Optional[float]:
  """The share of blocks task 0 started late over the traces named (of
  `late_starts`) of unroll `unroll`, or of any unroll if none is; None
  without such traces."""
  chosen = [counts[n] for n in trace_names if n in counts]
  alike = [c for c in chosen if c[0] == unroll] or chosen
  total = sum(c[2] for c in alike)
  return sum(c[1] for c in alike) / total if total else None


def _collective_samples(traces: Dict[str, Dict[str, Any]]
                        ) -> Tuple[List[float], List[float]]:
  sizes, seconds = [], []
  for trace in traces.values():
    for e in trace.get("traceEvents", ()):
      if e.get("cat") == "collective" and e.get("ph") == "X":
        nbytes = (e.get("args") or {}).get("bytes")
        if nbytes and e.get("dur", 0) > 0:
          sizes.append(float(nbytes))
          seconds.append(e["dur"] * 1e-6)
  return sizes, seconds


def cost_model(results_dir: str, results: Dict[str, Any],
               traces: Dict[str, Dict[str, Any]], total_bytes: int,
               fallback: str = "comm", link_burst: float = 0.0, cpu=None):
  """(CostModel of a collective timed alone, where it came from).

  Without a token bucket a collective timed alone takes `alpha + beta *
  s`. With one (`link_burst` > 0, seconds of traffic) it does not: back
  to back, the bucket refills only during each repeat's fixed cost, and
  small collectives pass in a burst (`execution.repeated_seconds`, with
  `cpu`'s per-byte work). Then cost_model.json's samples are refitted
  with it (`fit_alone`), and beta from comm_s solves it; the fit over the
  traced collectives stays linear (their durations are not repeats
  alone).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  given = _read_json(os.path.join(results_dir, "cost_model.json"))
  if given is not None:
    samples = given.get("samples") or {}
    if link_burst and len(samples) >= 2:
      fitted = fit_alone([float(b) for b in samples],
                         [float(t) for t in samples.values()], link_burst,
                         cpu)
      return fitted, (f"cost_model.json, its {len(samples)} samples "
                      "refitted with the link's token bucket")
    return plan_lib.CostModel.from_dict(given), "cost_model.json"
  if fallback == "trace":
    sizes, seconds = _collective_samples(traces)
    if len(set(sizes)) >= 2:
      fitted = plan_lib.CostModel.fit(sizes, seconds)
      return fitted, (f"fit over {len(sizes)} traced collectives "
                      f"({len(set(sizes))} sizes)")
  comm_s = results["comm_s"]
  alpha = min(GRPC_ALPHA_S, comm_s)
  source = (f"alpha {alpha * 1e3:.1f} ms (one collective alone, testbed), "
            "beta from comm_s")
  if not link_burst:
    return (plan_lib.CostModel(alpha=alpha,
                               beta=(comm_s - alpha) / total_bytes), source)
  # The beta whose repeated all-reduce of every gradient byte takes comm_s
  # (nondecreasing in beta: bisection).
  model = execution.ExecutionModel(cpu=cpu, link_burst=link_burst)
  seconds = lambda beta: execution.repeated_seconds(
      plan_lib.CostModel(alpha, beta), total_bytes, model)
  lo, hi = 0.0, (comm_s + link_burst) / total_bytes
  for _ in range(200):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if seconds(mid) < comm_s else (lo, mid)
  return (plan_lib.CostModel(alpha=alpha, beta=hi),
          source + " with the link's token bucket")


def fit_alone(nbytes: Sequence[float], seconds: Sequence[float],
              link_burst: float, cpu=None):
  """alpha and beta of collectives timed alone on a token-bucket link.

  Least squares of `execution.repeated_seconds` (a collective repeated
  back to back, alone; `cpu`'s per-byte work sets the speed of a burst)
  over the samples. That function is linear in (alpha, beta) in each of
  its regimes: a sample whose bytes the fixed cost's refill covers takes
  `alpha + f * beta * s` (f = cpu.beta / beta, at most 1); one that empties
  the bucket takes `alpha + beta * s - link_burst` (a full bucket, alpha
  above it) or `beta * s` (the fixed cost's refill, alpha hidden). The
  regimes follow the size, so every split of the sorted sizes into a
  small and a large part and every form of each part is solved linearly,
  and the candidate whose `repeated_seconds` fit the samples best is kept;
  on a tie the smallest alpha (with every sample's alpha hidden, alpha is
  not measured: at least 0, as the linear fit's clipping says). With
  `link_burst` 0 this is the linear fit (`CostModel.fit`).

  Args:
    nbytes: sizes of the samples (>= 2 distinct).
    seconds: their times alone.
    link_burst: seconds of traffic the link's bucket holds, >= 0.
    cpu: the CPU cost of a collective (its beta), or None.

  Returns:
    The CostModel.

  Raises:
    ValueError: on mismatched lengths or fewer than 2 distinct sizes.
  """
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  x = np.asarray(nbytes, dtype=float)
  y = np.asarray(seconds, dtype=float)
  if x.shape != y.shape or x.ndim != 1 or len(np.unique(x)) < 2:
    raise ValueError("fit_alone: need 1-D samples of equal length at >= 2 "
                     "distinct sizes.")
  if not link_burst:
    return plan_lib.CostModel.fit(x, y)
  model = execution.ExecutionModel(cpu=cpu, link_burst=link_burst)
  cpu_beta = 0.0 if cpu is None else cpu.beta
  order = np.argsort(x)
  best = []
  for k in range(len(x) + 1):
    small, large = order[:k], order[k:]
    for small_form in ("cpu", "rate"):  # f < 1; f = 1 (beta <= cpu.beta)
      for large_form in ("full", "refill"):
        rows, target = [], []
        for i in small:
          if small_form == "cpu":
            rows.append([1.0, 0.0])
            target.append(y[i] - cpu_beta * x[i])
          else:
            rows.append([1.0, x[i]])
            target.append(y[i])
        for i in large:
          rows.append([1.0 if large_form == "full" else 0.0, x[i]])
          target.append(y[i] + (link_burst if large_form == "full" else 0))
        (alpha, beta), *_ = np.linalg.lstsq(np.array(rows),
                                             np.array(target), rcond=None)
        fitted = plan_lib.CostModel(alpha=max(0.0, float(alpha)),
                                    beta=max(0.0, float(beta)))
        error = sum((execution.repeated_seconds(fitted, s, model) - t) ** 2
                    for s, t in zip(x, y))
        best.append((error, fitted.alpha, fitted.beta))
  # Ties up to round-off (1e-6 of the samples, relative).
  least = min(e for e, _, _ in best) + 1e-12 * float(np.sum(y ** 2))
  _, alpha, beta = min((c for c in best if c[0] <= least * (1 + 1e-9)),
                       key=lambda c: (c[1], c[2]))
  return plan_lib.CostModel(alpha=alpha, beta=beta)


def _scaled(dag, factor: float, forward_factor: Optional[float] = None):
  """`dag` with every op x factor (forward ops x forward_factor if given)."""
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  fwd = factor if forward_factor is None else forward_factor
  ops = [plan_lib.Op(o.name, o.phase,
                     o.duration * (fwd if o.phase == "forward" else factor))
         for o in dag.ops]
  return plan_lib.TrainingDAG(ops, dag.edges, dag.tensors)


def _with_forward_share(dag, share: float):
  """`dag` with the forward pass `share` of forward + backward, same sum."""
  forward, backward = dag.forward_length(), dag.backward_end()
  total = forward + backward
  return _scaled(dag, (1 - share) * total / backward,
                 share * total / forward)


def _dense(dag) -> List[int]:
  """Positions of the DAG's dense tensors (the ones the runtime plans)."""
  return [i for i, t in enumerate(dag.tensors) if t.sparse is None]


def _on_dag(dag, positions: Sequence[int], plan):
  """`plan`, made for the DAG's tensors at `positions` (in order), as a
  plan over all of the DAG's tensors: the others (the sparse ones) are
  appended, one collective each, as the runtime issues them after the
  plan's; the execution model replaces those by its all-gathers."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan.plan import ALL_REDUCE
  # pylint: enable=g-import-not-at-top
  tensors = plan_lib.make_plan(dag, plan_lib.CostModel(0, 0), "fifo").tensors
  groups = [[(positions[p.tensor], p.offset, p.length) for p in c.pieces]
            for c in plan.collectives]
  kinds = [c.kind for c in plan.collectives]
  for i in sorted(set(range(len(dag.tensors))) - set(positions)):
    groups.append([(i, 0, dag.tensors[i].nbytes)])
    kinds.append(ALL_REDUCE)
  return plan_lib.plan_from_groups(tensors, groups, scheduler=plan.scheduler,
                                   options=plan.options, kinds=kinds)


def _recorded_plan(plans_dir: str, name: str, dag):
  """(The plan row `name` ran, or None; how it was read).

  The runtime names a plan's tensors after graph tensors ("value[3]"), not
  the DAG's layers, and its own plans cover only the dense gradients (it
  all-gathers `IndexedSlices` outside the plan). A plan whose tensor sizes
  equal the DAG's, or its dense tensors', in order (both follow the
  model's trainable variables), is put on the DAG's tensors. Otherwise the
  recorded plan is not usable here: (None, why).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import simulator
  # pylint: enable=g-import-not-at-top
  path = os.path.join(plans_dir, name + ".json")
  if not os.path.isfile(path):
    return None, "not recorded"
  with open(path) as f:
    plan = plan_lib.Plan.from_json(f.read())
  try:
    simulator.check_plan_matches(dag, plan)
    return plan, "recorded"
  except ValueError as e:
    error = e
  sizes = [t.nbytes for t in plan.tensors]
  dense = _dense(dag)
  if sizes == [t.nbytes for t in dag.tensors]:
    return (_on_dag(dag, range(len(dag.tensors)), plan),
            "recorded (tensors matched by position and size)")
  if len(dense) < len(dag.tensors) and sizes == [dag.tensors[i].nbytes
                                                  for i in dense]:
    return (_on_dag(dag, dense, plan),
            "recorded (the dense tensors, matched by position and size)")
  return None, f"recorded for other tensors ({error})"


def issued_tensors(dag, plan, workers: Optional[int]) -> List[set]:
  """The tensors of each collective of `plan` the runtime issues, in order.

  Args:
    dag: the training DAG.
    plan: a plan over it.
    workers: as `ExecutionModel.workers`: with workers the DAG's sparse
      tensors are all-gathered instead, their pieces dropped from the
      plan (a collective left empty is not issued); None keeps them.
  """
  sparse = set()
  if workers is not None:
    sparse = {i for i, t in enumerate(dag.tensors) if t.sparse is not None}
  issued = [{p.tensor for p in c.pieces} - sparse for c in plan.collectives]
  return [tensors for tensors in issued if tensors]


def per_tensor_collectives(dag, plan) -> bool:
  """Whether `plan` issues a collective per dense tensor or more (chunks,
  as priority and bytescheduler do) rather than fusing tensors."""
  return _dense_collectives(dag, plan) >= len(_dense(dag))


def _dense_collectives(dag, plan) -> int:
  """Collectives of `plan` the runtime issues: those with a dense piece."""
  return len(issued_tensors(dag, plan, workers=1))


def _given(args: Sequence[str]) -> Dict[str, str]:
  return dict(a[2:].split("=", 1) for a in args if a.startswith("--") and
              "=" in a)


def _sparse_as_dense(args: Sequence[str]) -> bool:
  """Whether a row ran with --sparse_as_dense: its `IndexedSlices` were
  densified and reduced as its plan says, not all-gathered after it."""
  value = None
  for a in args:
    if a == "--sparse_as_dense":
      value = True
    elif a == "--nosparse_as_dense":
      value = False
    elif a.startswith("--sparse_as_dense="):
      value = a.split("=", 1)[1].lower() in ("true", "1", "yes")
  return bool(value)


def _credit(given: Dict[str, str]) -> Dict[str, Any]:
  """`ExecutionModel` credit arguments of a row's --credit_* flags (the
  runtime's default on CPUs where absent)."""
  return {"max_collectives": int(given.get("credit_collectives",
                                           DEFAULT_CREDIT_COLLECTIVES)),
          "max_bytes": (int(given["credit_bytes"]) if "credit_bytes" in given
                        else None)}


def model_tail(dag, cost, plan, model) -> float:
  """Seconds the execution model puts after a block's last planned
  collective: what a trace's block tail holds of the model (the sparse
  all-gathers follow the dense collectives and are not traced); 0 without
  them. Simulated without the block overhead."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  ex = execution.execute(dag, cost, plan,
                         dataclasses.replace(model, block_overhead=0.0))
  ends = [e for step in ex.collective_end for e in step]
  return ex.block_time - max(ends) if ends else 0.0


def runtime_plan(dag, scheduler: str, workers: int, options: Dict[str, Any]):
  """The plan the runtime makes for `dag`'s tensors from their sizes alone.

  Mirrors `tf_preempt.runtime.default_plan.make_default_plan` for one
  float32 group and a planner scheduler (that function needs the runtime's
  value specs): a chain DAG with one layer per dense tensor (the runtime
  plans no `IndexedSlices`), compute growing with its size, and the
  nominal ring cost model. The sparse tensors are appended (`_on_dag`).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.runtime import default_plan
  # pylint: enable=g-import-not-at-top
  dense = _dense(dag)
  sizes = [dag.tensors[i].nbytes for i in dense]
  chain = plan_lib.TrainingDAG.chain(
      forward_s=[max(default_plan.MIN_OP_S,
                     s * default_plan.FORWARD_S_PER_BYTE) for s in sizes],
      backward_s=[max(default_plan.MIN_OP_S,
                      s * default_plan.BACKWARD_S_PER_BYTE) for s in sizes],
      nbytes=sizes, itemsize=dag.tensors[0].itemsize)
  nominal = plan_lib.CostModel.ring(
      max(1, workers), default_plan.DEFAULT_BANDWIDTH_BYTES_PER_S,
      default_plan.DEFAULT_LATENCY_S)
  sub = plan_lib.make_plan(chain, nominal, scheduler=scheduler, **options)
  return _on_dag(dag, dense, dataclasses.replace(sub, options=options))


def _row_plan(plans_dir, name, scheduler, args, dag, cost, workers):
  """(The plan row `name` ran, or the best stand-in; where it came from)."""
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  plan, how = _recorded_plan(plans_dir, name, dag)
  if plan is not None:
    return plan, how
  given = _given(args)
  if scheduler in ("tf_default", "tf_packed"):
    options = {}
    if scheduler == "tf_packed" and "bytes_per_pack" in given:
      options["bytes_per_pack"] = int(given["bytes_per_pack"])
    # Stock packs the dense gradients; IndexedSlices are all-gathered.
    dense = _dense(dag)
    sub_dag = plan_lib.TrainingDAG(dag.ops, dag.edges,
                                   [dag.tensors[i] for i in dense])
    plan, source = (_on_dag(dag, dense, plan_lib.make_plan(
        sub_dag, cost, scheduler, **options)),
                    "stock packing (planner's copy)")
  else:
    plan, source = (runtime_plan(dag, scheduler, workers, {}),
                    "runtime's plan from gradient sizes (rebuilt)")
  if how != "not recorded":
    source += f"; plans/{name}.json {how}"
  return plan, source


# --- Measurements from the Chrome traces (worker 0), for the calibration.


def _blocks(trace: Dict[str, Any]) -> List[Dict[str, Any]]:
  """Per steady-state block: head, tail and small-collective durations.

  The first block (tracing, connection set-up) is left out. A block needs
  the bench's compute events and the collectives' `iteration`, `bytes`
  and `ready_ns` args and the trace's `origin_ns`; without them, [].
  """
  origin = (trace.get("otherData") or {}).get("origin_ns")
  events = trace.get("traceEvents", ())
  blocks = sorted((e for e in events if e.get("cat") == "compute" and
                   e.get("ph") == "X"), key=lambda e: e["ts"])
  colls = [e for e in events if e.get("cat") == "collective" and
           e.get("ph") == "X" and
           {"iteration", "bytes", "ready_ns"} <= set(e.get("args") or {})]
  if origin is None or not colls:
    return []
  out = []
  for b in blocks[1:]:
    start, end = b["ts"], b["ts"] + b["dur"]
    inside = [e for e in colls if start <= e["ts"] < end]
    if not inside:
      continue
    by_step = {}
    for e in inside:
      by_step.setdefault(e["args"]["iteration"], []).append(e)
    first = by_step[min(by_step)]
    ready = lambda e: (e["args"]["ready_ns"] - origin) / 1e3  # us
    small, interval = [], []
    for step in by_step.values():
      last_ready = max(ready(e) for e in step)
      is_small = lambda e: e["args"]["bytes"] <= SMALL_COLLECTIVE_BYTES
      small += [e["dur"] * 1e-6 for e in step
                if is_small(e) and e["ts"] + e["dur"] <= last_ready]
      # Two small collectives in flight together after the backward pass:
      # the second ends one serial (CPU) part after the first.
      step = sorted(step, key=lambda e: e["ts"])
      for a, b in zip(step, step[1:]):
        a_end = a["ts"] + a["dur"]
        if (is_small(a) and is_small(b) and b["ts"] < a_end and
            a["ts"] >= last_ready):
          interval.append((b["ts"] + b["dur"] - a_end) * 1e-6)
    out.append({
        "head_s": (min(ready(e) for e in first) - start) * 1e-6,
        "tail_s": (end - max(e["ts"] + e["dur"] for e in inside)) * 1e-6,
        "small_s": small, "interval_s": interval,
        "block_s": (end - start) * 1e-6})
  return out


# The calibration figures only traces with small collectives in flight
# together carry (see `calibrate`).
SMALL_COLLECTIVE_KEYS = ("small_s", "interval_s")


def calibrate(blocks_of: Dict[str, List[Dict[str, Any]]],
              exclude: Sequence[str], disturbed: Sequence[str] = ()
              ) -> Dict[str, Any]:
  """Medians over the traces of every row but those named in `exclude`.

  Args:
    blocks_of: {trace name: its `_blocks`}.
    exclude: trace names to leave out.
    disturbed: trace names to leave out too, except for the small-
      collective figures (`SMALL_COLLECTIVE_KEYS`) when no other trace has
      them: only some rows' traces measure them (many small collectives in
      flight), and a disturbed measurement beats none (the CPU part would
      fall back to all of alpha and the share to 1).

  Returns:
    {"heads": {trace: its blocks' times to their first ready gradient},
    "tail_s": a block's last collective to its end, "small_s":
    durations of small collectives while the backward pass computed,
    "interval_s": the time between the ends of two small collectives in
    flight together after the backward pass (the part of a collective's
    fixed cost that does not overlap: its CPU work), "rows": the traces
    used, "tails": {trace: its blocks' tails}, "from_disturbed": the
    small-collective keys taken from disturbed traces}; a value is None
    without samples.
  """
  calib = _medians(blocks_of, set(exclude) | set(disturbed))
  calib["from_disturbed"] = []
  if disturbed and any(calib[k] is None for k in SMALL_COLLECTIVE_KEYS):
    noisy = _medians(blocks_of, exclude)
    for key in SMALL_COLLECTIVE_KEYS:
      if calib[key] is None and noisy[key] is not None:
        calib[key] = noisy[key]
        calib["from_disturbed"].append(key)
  return calib


def _medians(blocks_of: Dict[str, List[Dict[str, Any]]],
             exclude: Collection[str]) -> Dict[str, Any]:
  """`calibrate`'s figures over the traces not in `exclude`."""
  tails, small, interval = [], [], []
  by_trace, heads = {}, {}
  for name, blocks in sorted(blocks_of.items()):
    if name in exclude or not blocks:
      continue
    by_trace[name] = [b["tail_s"] for b in blocks]
    tails += by_trace[name]
    heads[name] = [b["head_s"] for b in blocks]
    for b in blocks:
      small += b["small_s"]
      interval += b["interval_s"]
  med = lambda v: statistics.median(v) if v else None
  return {"heads": heads, "tail_s": med(tails), "small_s": med(small),
          "interval_s": med(interval), "rows": list(by_trace),
          "tails": by_trace}


def first_ready_fraction(dag, plan, workers: Optional[int]
                         ) -> Optional[float]:
  """Where in the backward pass a step's first collective becomes ready.

  A trace's block head (block start to the first ready gradient) is the
  start-up, the forward pass and this fraction of the backward pass: the
  time until every tensor of the earliest-ready collective is produced.
  The same at any forward share (`_with_forward_share` scales each pass
  as a whole).

  Args:
    dag: the training DAG.
    plan: the row's plan over it.
    workers: as in `issued_tensors`.

  Returns:
    The fraction in [0, 1], or None if the plan issues no collective.
  """
  ready = dag.ready_times()
  readies = [max(ready[t] for t in tensors)
             for tensors in issued_tensors(dag, plan, workers)]
  if not readies:
    return None
  return float(min(readies) / dag.backward_end())


def lad_fit(samples: Sequence[Tuple[Any, float, float]],
            slopes: Sequence[float]) -> Tuple[float, Dict[Any, float]]:
  """Least absolute deviations of y = intercept[group] + slope * x.

  Robust to a few disturbed samples, where least squares is not: each
  group's intercept is its median residual, the slope the first candidate
  that minimises the summed |residual|.

  Args:
    samples: (group, x, y) triples, at least one.
    slopes: the candidate slopes.

  Returns:
    (slope, {group: intercept}).
  """
  groups = sorted({g for g, _, _ in samples})

  def intercepts(a):
    return {g: statistics.median(y - a * x for gg, x, y in samples
                                 if gg == g) for g in groups}

  def deviation(a):
    o = intercepts(a)
    return sum(abs(y - o[g] - a * x) for g, x, y in samples)

  # The sum is piecewise linear in the slope and often flat over a range:
  # take the first of the candidates within round-off of the least, so
  # that the choice does not hang on the last bits of the samples.
  deviations = [deviation(a) for a in slopes]
  least = min(deviations)
  slope = next(a for a, d in zip(slopes, deviations) if d <= least + 1e-12)
  return slope, intercepts(slope)


def last_collective_tensors(dag, plan, workers: Optional[int]) -> int:
  """Tensors in the last collective the runtime issues for `plan` (0 if
  none); `workers` as in `issued_tensors`."""
  issued = issued_tensors(dag, plan, workers)
  return len(issued[-1]) if issued else 0


def fit_block_head(samples: Sequence[Tuple[int, float, float]],
                   compute_s: float, share: Optional[float] = None,
                   default_share: Optional[float] = None
                   ) -> Tuple[Optional[float], Dict[int, float]]:
  """The forward share of compute and each K's block start-up, from heads.

  A block's head (its start to its first ready gradient) is modelled as
  `startup[K] + compute_s * (share + (1 - share) * f)`, f the fraction of
  the backward pass before the first collective is ready
  (`first_ready_fraction`). Rows that reduce everything in one collective
  (f = 1) measure the start-up alone; rows whose first collective holds
  only the last layers' gradients (f near 0) measure the forward share.
  Fitted by least absolute deviations (`lad_fit`, share in [0.05, 0.95]).

  Args:
    samples: (K, f, head seconds) per trace (its blocks' median head).
    compute_s: the measured compute of one step.
    share: a given forward share (not fitted), or None.
    default_share: the share when the samples cannot tell it (their f
      differ by less than 0.25) and none is given.

  Returns:
    (share, {K: start-up seconds, >= 0}); share is None only if it was
    neither identifiable, given nor defaulted (then no start-ups).
  """
  if not samples:
    return (default_share if share is None else share), {}
  fractions = [f for _, f, _ in samples]
  if share is None and max(fractions) - min(fractions) < 0.25:
    share = default_share
  if share is None:
    slopes = [i / 100 for i in range(5, 96)]
  else:
    slopes = [share]
  # head - C f = startup[K] + share * C (1 - f)
  share, startups = lad_fit([(k, compute_s * (1 - f), h - compute_s * f)
                             for k, f, h in samples], slopes)
  return share, {k: max(0.0, u) for k, u in startups.items()}


def _setting(value: str, name: str) -> Optional[float]:
  """None for "traces", else the number."""
  if value == "traces":
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f"--{name}={value!r}: 'traces' or a number") from None


def cpu_cost_model(results_dir: str, setup: Dict[str, Any], cost,
                   total_bytes: int, source: str = "auto"):
  """(CPU cost of a collective or None, where it came from).

  Args:
    results_dir: the directory being validated.
    setup: its `_setup`.
    cost: its cost model of a collective alone.
    total_bytes: the model's gradient bytes.
    source: "none"; "auto" (the newest `contention_cost` of the
      directory's link and worker count beside it; else this directory's
      `cost` if its link is CPU-bound, else the fastest CPU-bound sibling
      directory of the same worker count, else none); or a results
      directory or a cost_model.json measured on a CPU-bound link, or a
      cpu_cost.json of scripts/bench_contention.py.

  Returns:
    The CPU cost: measured as the compute's loss to a concurrent
    collective (a contention cpu_cost.json), or the collective's time
    alone on a CPU-bound link, all of it taken as CPU work (an upper
    bound), or None; and a description.

  Raises:
    ValueError: if `source` is a path with neither file.
  """
  from tf_preempt import plan as plan_lib  # pylint: disable=g-import-not-at-top
  if source == "none":
    return None, "none (communication takes no compute time)"
  if source == "auto":
    source = contention_cost(results_dir, setup)
  if source == "auto" or source is None:
    link = setup.get("link_bits_per_s")
    if link is not None and link >= CPU_BOUND_BITS_PER_S:
      return cost, "this directory's own cost model (CPU-bound link)"
    source = _fastest_cpu_bound_sibling(results_dir, setup)
    if source is None:
      return None, ("none: no results directory of the same worker count "
                    "on a CPU-bound link beside this one")
  path = (os.path.join(source, "cost_model.json") if os.path.isdir(source)
          else source)
  name = os.path.relpath(path, os.path.dirname(os.path.abspath(results_dir)))
  if os.path.isfile(path):
    return plan_lib.CostModel.from_dict(_read_json(path)), name
  results = _read_json(os.path.join(source, "results.json"))
  if results is None:
    raise ValueError(f"cpu_cost={source!r}: no cost_model.json or "
                     "results.json there")
  alpha = min(GRPC_ALPHA_S, results["comm_s"])
  return (plan_lib.CostModel(alpha=alpha, beta=(results["comm_s"] - alpha) /
                             total_bytes),
          f"{os.path.dirname(name)}: alpha {alpha * 1e3:.1f} ms (testbed), "
          "beta from its comm_s")


def contention_cost(results_dir: str, setup: Dict[str, Any]
                    ) -> Optional[str]:
  """The newest `CONTENTION_GLOB` beside `results_dir` measured on its
  link rate with its worker count (bench_contention runs 2), or None."""
  parent = os.path.dirname(os.path.abspath(results_dir))
  rate = setup.get("link_bits_per_s")
  if rate is None or setup.get("workers") != 2:
    return None
  found = [path for path in sorted(glob.glob(os.path.join(
      parent, CONTENTION_GLOB)))
           if link_bits_per_s((_read_json(path) or {}).get("bandwidth") or
                              "") == rate]
  return found[-1] if found else None


def _fastest_cpu_bound_sibling(results_dir: str, setup: Dict[str, Any]
                               ) -> Optional[str]:
  """The sibling results directory of the same worker count on the fastest
  link of at least CPU_BOUND_BITS_PER_S (on a tie: one with a
  cost_model.json, then the same model, then the newest name), or None."""
  best = None
  parent = os.path.dirname(os.path.abspath(results_dir))
  for path in sorted(glob.glob(os.path.join(parent, "*", "results.json"))):
    other = os.path.dirname(path)
    other_setup = _setup(_read_json(path), {})
    rate = other_setup["link_bits_per_s"]
    # The CPU cost of a collective is the machine's and the ring's (worker
    # count), not the model's.
    if (rate is None or rate < CPU_BOUND_BITS_PER_S or
        other_setup["workers"] != setup["workers"]):
      continue
    # The fastest link; on a tie, one with a cost_model.json, then the
    # same model, then the newest name.
    key = (rate, os.path.isfile(os.path.join(other, "cost_model.json")),
           other_setup["model"] == setup["model"], os.path.basename(other))
    if best is None or key > best[0]:
      best = (key, other)
  return None if best is None else best[1]


def _fastest_references(results: Dict[str, Any], details: Dict[str, Any]
                        ) -> Dict[str, float]:
  """compute_s and comm_s from their fastest runs in details.json."""
  out = {}
  for key, name in (("compute_s", "compute alone"),
                    ("comm_s", "communication alone")):
    runs = [r["value_s"] for r in details.get("runs") or ()
            if r.get("name") == name and r.get("value_s")]
    out[key] = min(runs) if runs else results[key]
  return out


def validate(results_dir: str, gpu: str = "v100", cost_fallback: str = "comm",
             cpu_cost: str = "auto", comm_cpu_share: str = "traces",
             bytes_cpu_share: float = 1.0,
             block_overhead_ms: str = "traces",
             block_startup_ms: str = "traces",
             forward_share: str = "traces",
             reference: str = "median",
             order_penalty: str = "auto") -> Dict[str, Any]:
  """Predicts every row of RESULTS_DIR/results.json; see the module doc.

  Args:
    results_dir: a `scripts/bench.py` output directory.
    gpu: GPU of the FLOPs model (per-op shape only).
    cost_fallback: "comm" or "trace", without cost_model.json.
    cpu_cost: "auto", "none", or a results directory / cost_model.json.
    comm_cpu_share: "traces" or a number in (0, 1].
    bytes_cpu_share: in (0, 1]; see `ExecutionModel.bytes_cpu_share`.
    block_overhead_ms: "traces" or milliseconds.
    block_startup_ms: "traces" or milliseconds.
    forward_share: "traces", "flops" or a number in (0, 1).
    reference: "median" (results.json's medians) or "fastest" (every
      row's fastest repeat, and the fastest compute-alone and
      communication-alone runs of details.json).
    order_penalty: "auto", "none" or a runs.jsonl of
      scripts/bench_arrival_order.py (`order_penalty_runs`).

  Returns:
    {"rows": {NAME@K: {"scheduler", "unroll", "measured_s", "predicted_s",
    "error", "planner_model_s", "plan", "model", "calibration"}},
    "max_abs_error", "median_abs_error", "target", "inputs": {where each
    input came from}, "missing": [what the benchmark should record]}.

  Raises:
    ValueError: if the directory has no results.json, or on a bad setting.
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  results = _read_json(os.path.join(results_dir, "results.json"))
  if results is None:
    raise ValueError(f"{results_dir} has no results.json")
  if "schedulers" not in results:
    raise ValueError(f"{results_dir}/results.json has no scheduler rows: "
                     "not a scripts/bench.py results directory")
  share_given = _setting(comm_cpu_share, "comm_cpu_share")
  overhead_given = _setting(block_overhead_ms, "block_overhead_ms")
  startup_given = _setting(block_startup_ms, "block_startup_ms")
  forward_given = (None if forward_share in ("traces", "flops") else
                   _setting(forward_share, "forward_share"))
  details = _read_json(os.path.join(results_dir, "details.json")) or {}
  if reference not in ("median", "fastest"):
    raise ValueError(f"reference={reference!r}: 'median' or 'fastest'")
  if reference == "fastest":
    results = dict(results, **_fastest_references(results, details))
  traces = _worker0_traces(results_dir)
  setup = _setup(results, traces)
  per_worker = setup["global_batch_size"] // setup["workers"]
  missing = []

  profile_path = os.path.join(results_dir, "profile.json")
  has_profile = os.path.isfile(profile_path)
  # scripts/simulate.py (its cached model DAG builder), imported only here
  # because it loads TensorFlow; a script's folder is on sys.path.
  import simulate  # pylint: disable=g-import-not-at-top
  base_dag = simulate.model_dag(setup["model"], per_worker, gpu,
                                profile_path if has_profile else None)
  scale = 1.0
  if has_profile:
    compute_source = "profile.json"
  else:
    scale = results["compute_s"] / (base_dag.backward_end() +
                                    base_dag.forward_length())
    base_dag = _scaled(base_dag, scale)
    compute_source = (f"{gpu} FLOPs model scaled x{scale:.3g} to the "
                      f"measured compute_s {results['compute_s'] * 1e3:.1f} ms")
    missing.append("profile.json: measured seconds of every forward and "
                   "backward op of one step, {op name: seconds} with the op "
                   "names of tf_preempt.profile.model_to_dag (e.g. from "
                   "scripts/bench_profile.py), per worker count")
  total_bytes = sum(t.nbytes for t in base_dag.tensors)
  cost, cost_source = cost_model(results_dir, results, traces, total_bytes,
                                 cost_fallback)
  if not cost_source.startswith("cost_model.json"):
    missing.append("cost_model.json: {alpha, beta} fitted "
                   "(CostModel.fit) from all-reduces of >= 4 sizes timed "
                   "alone on the benchmark's link and worker count")
  cpu, cpu_source = cpu_cost_model(results_dir, setup, cost, total_bytes,
                                   cpu_cost)
  # The link's token bucket (tc tbf's burst over its rate): the cost of a
  # collective alone is refitted with it. Where the collective's own cost
  # is taken as CPU work (a CPU-bound link) its bytes need the whole core
  # at the rate and the bucket cannot speed them: nothing to refit.
  link_burst = setup["link_burst_s"]
  if link_burst and cpu is not cost:
    cost, cost_source = cost_model(results_dir, results, traces, total_bytes,
                                   cost_fallback, link_burst, cpu)
  alone = execution.ExecutionModel(cpu=cpu, link_burst=link_burst)
  # The penalty when task 0 reaches a collective last: measured with two
  # workers on an emulated link, in seconds of traffic beyond its bucket.
  penalty_runs, penalty_source = order_penalty_runs(results_dir,
                                                    order_penalty)
  penalty = order_penalty_points(penalty_runs)
  if penalty and (setup["workers"] != 2 or not link_burst):
    penalty, penalty_source = (), (
        f"none: measured with 2 workers on an emulated link ("
        f"{penalty_source}), not {setup['workers']} on "
        f"{setup['link_rate'] or 'loopback'}")
  elif penalty_runs and not penalty:
    penalty_source = f"none: no run of {penalty_source} exceeds its bucket"
  # Task 0's late blocks after the warm-up (bench.py's default warm-up),
  # per two-worker trace.
  late = (late_starts(results_dir, traces,
                      int(command_flag(results, "warmup_steps", "8")))
          if penalty else {})

  settings = details.get("settings") or {}
  plans_dir = os.path.join(results_dir, "plans")
  row_of_trace = {trace_name(name): name for name in results["schedulers"]
                  if split_name(name)[0] in plan_lib.SCHEDULERS}
  # Without sparse gradients the model puts nothing after a block's last
  # collective.
  base_dag_sparse = any(t.sparse is not None for t in base_dag.tensors)
  stand_in_plans = False
  blocks_of = {name: _blocks(trace) for name, trace in traces.items()}
  # Per traced row: the plan it ran (its plan depends on the tensor sizes
  # only, not on the per-op times), its args and `workers`; where its first
  # collective becomes ready, for the fit of the forward share and the
  # block start-up to the traces' block heads; how many tensors its last
  # collective updates (their updates, the fused buffer's unpacking and
  # the optimizer, follow that collective). A trace is of the row's last
  # run: if that run was more than the target slower than the row's
  # fastest repeat, something else slowed it (the machine is shared) and
  # its measurements would carry that into the other rows' predictions.
  ran, first_ready, last_tensors, disturbed = {}, {}, {}, set()
  for trace, other in row_of_trace.items():
    other_args = (settings.get(other) or {}).get("args") or ()
    other_plan, _ = _row_plan(plans_dir, other, split_name(other)[0],
                              other_args, base_dag, cost, setup["workers"])
    workers = None if _sparse_as_dense(other_args) else setup["workers"]
    ran[trace] = (other_plan, other_args, workers)
    first_ready[trace] = first_ready_fraction(base_dag, other_plan, workers)
    last_tensors[trace] = last_collective_tensors(base_dag, other_plan,
                                                  workers)
    blocks = blocks_of.get(trace)
    fastest = min(results["schedulers"][other].get("step_s") or
                  [results["schedulers"][other]["median_s"]])
    if blocks and (statistics.median(b["block_s"] for b in blocks) /
                   split_name(other)[1] > (1 + TARGET_ABS_ERROR) * fastest):
      disturbed.add(trace)
  compute_total = base_dag.forward_length() + base_dag.backward_end()
  flops_share = base_dag.forward_length() / compute_total
  rows = {}
  for name, row in results["schedulers"].items():
    scheduler, unroll = split_name(name)
    measured = float(row["median_s"] if reference == "median" else
                     min(row.get("step_s") or [row["median_s"]]))
    entry = {"scheduler": scheduler, "unroll": unroll, "measured_s": measured,
             "predicted_s": None, "error": None}
    rows[name] = entry
    if scheduler not in plan_lib.SCHEDULERS:
      entry["note"] = "not a planner scheduler"
      continue
    calib = calibrate(blocks_of, exclude={trace_name(name)},
                      disturbed=disturbed)
    heads = [(trace_unroll(t), first_ready[t],
              statistics.median(h)) for t, h in sorted(calib["heads"].items())
             if h and first_ready.get(t) is not None]
    # With a profile (or --forward_share=flops) the per-op times are kept
    # and only the start-ups are fitted.
    fixed_share = (flops_share if has_profile or forward_share == "flops"
                   else forward_given)
    share_f, startups = fit_block_head(heads, compute_total, fixed_share,
                                       default_share=flops_share)
    dag = base_dag
    if fixed_share is None:
      dag = _with_forward_share(base_dag, share_f)
    startup = (startups.get(unroll, 0.0) if startup_given is None else
               startup_given * 1e-3)
    args = (settings.get(name) or {}).get("args") or ()
    plan, plan_source = _row_plan(plans_dir, name, scheduler, args, dag, cost,
                                  setup["workers"])
    stand_in_plans |= not plan_source.startswith("recorded")
    given = _given(args)
    row_cpu = cpu
    if cpu is not None and calib["interval_s"] is not None:
      # The serial part of the fixed cost, measured; the rest is latency.
      # It is at most a collective's fixed cost alone: the larger of the
      # CPU cost's own and this run's, so that a CPU cost measured at
      # another time, on a quieter machine, does not cut what this run's
      # traces show.
      row_cpu = plan_lib.CostModel(
          alpha=min(calib["interval_s"], max(cpu.alpha, cost.alpha)),
          beta=cpu.beta)
    row_cost = cost
    if row_cpu is not None and row_cpu.alpha > cost.alpha:
      # A collective's fixed cost is at least its CPU part. A fit whose
      # samples all hide it (50 KB and more at 200 Mbit/s: behind the
      # bytes, with the token bucket; link-bound, in a linear fit) puts
      # alpha at 0; the CPU part measured in the traces bounds it below.
      row_cost = plan_lib.CostModel(alpha=row_cpu.alpha, beta=cost.beta)
    share = share_given
    if share is None and row_cpu is not None and calib["small_s"]:
      # A small collective's CPU part took small_s, less its latency, while
      # the backward pass computed.
      cpu_part = row_cpu.alpha
      busy = calib["small_s"] - (row_cost.alpha - cpu_part)
      if cpu_part > 0 and busy > 0:
        share = min(1.0, cpu_part / busy)
    weight = None
    if penalty:
      # Task 0's late starts depend on how the plan ends a block: chains
      # of one collective per tensor keep the workers together.
      others = set(row_of_trace) - {trace_name(name)} - disturbed
      kind = per_tensor_collectives(dag, plan)
      alike = {t for t in others
               if per_tensor_collectives(dag, ran[t][0]) == kind}
      weight = late_start_share(late, alike, unroll)
      if weight is None:
        weight = late_start_share(late, others, unroll)
    model = execution.ExecutionModel(
        order_penalty=penalty if weight else (),
        order_penalty_weight=weight or 0.0,
        unroll=unroll, **_credit(given), cpu=row_cpu,
        comm_cpu_share=share if share is not None else 1.0,
        bytes_cpu_share=bytes_cpu_share,
        workers=None if _sparse_as_dense(args) else setup["workers"],
        link_burst=link_burst, fixed_cpu_fifo=True)
    # The traces end at the last planned collective; the sparse all-gathers
    # after it are the model's, not part of the overhead: each other row's
    # measured tails less what this model puts after that row's last
    # planned collective (how long depends on the row: the bucket is empty
    # after one large collective, full after a chain of small ones).
    sparse_tail = per_tensor = None
    overhead = None if overhead_given is None else overhead_given * 1e-3
    if overhead is None and calib["tails"]:
      residuals, model_tails = [], []
      for other_trace, tails in sorted(calib["tails"].items()):
        other = row_of_trace.get(other_trace)
        tail = 0.0
        if base_dag_sparse and other is None:
          tail = execution.exchange_tail(dag, row_cost, dataclasses.replace(
              model, workers=setup["workers"]))
        elif base_dag_sparse:
          other_plan, other_args, workers = ran[other_trace]
          tail = model_tail(dag, row_cost, other_plan, dataclasses.replace(
              model, unroll=split_name(other)[1],
              **_credit(_given(other_args)), workers=workers))
        model_tails.append(tail)
        residuals += [(trace_unroll(other_trace),
                       last_tensors.get(other_trace, 0), t - tail)
                      for t in tails]
      sparse_tail = statistics.median(model_tails)
      per_tensor, fixed = lad_fit(residuals, UPDATE_SLOPES_S)
      overhead = max(0.0, fixed.get(unroll, statistics.median(
          fixed.values())) + per_tensor * last_collective_tensors(
              dag, plan, model.workers))
    overhead = overhead or 0.0
    model = dataclasses.replace(model, block_overhead=overhead,
                                block_startup=startup)
    predicted = execution.execute(dag, row_cost, plan, model).step_time
    entry.update(
        predicted_s=predicted, error=(predicted - measured) / measured,
        planner_model_s=plan_lib.simulate(dag, cost, plan).iteration_time,
        plan=plan_source,
        collectives=(len(plan.collectives) if model.workers is None else
                     _dense_collectives(dag, plan)),
        model=model.describe(),
        calibration={"forward_share": share_f, "comm_cpu_share": share,
                     "block_overhead_s": overhead,
                     "block_startup_s": startup,
                     "task0_late_share": weight,
                     "overhead_per_tensor_s": per_tensor,
                     "trace_tail_s": calib["tail_s"],
                     "sparse_tail_s": sparse_tail,
                     "from_traces": calib["rows"],
                     "small_collective_s": calib["small_s"],
                     "alpha_s": row_cost.alpha,
                     "cpu_fixed_s": None if row_cpu is None else row_cpu.alpha,
                     "heads": [{"unroll": k, "first_ready_fraction": f,
                                "head_s": h} for k, f, h in heads],
                     "tail_s_by_trace": {
                         t: statistics.median(v)
                         for t, v in sorted(calib["tails"].items())}})
    notes = []
    if calib["from_disturbed"]:
      entry["calibration"]["from_disturbed_traces"] = calib["from_disturbed"]
      notes.append("small-collective figures from disturbed traces (no "
                   "other trace has them)")
    runs = row.get("step_s") or []
    if len(runs) > 1 and min(runs) > 0:
      spread = (max(runs) - min(runs)) / min(runs)
      entry["repeat_spread"] = spread
      if spread > TARGET_ABS_ERROR:
        notes.append(f"repeats differ by {spread * 100:.0f}% "
                     "(machine noise)")
    if notes:
      entry["note"] = "; ".join(notes)
  if stand_in_plans:
    missing.append("plans/NAME@K.json: the plan each row ran "
                   "(Plan.to_json), with tensor names and sizes as in "
                   "model_to_dag; without it the runtime's plans are "
                   "rebuilt here")
  errors = [abs(r["error"]) for r in rows.values() if r["error"] is not None]
  return {
      "rows": rows,
      "max_abs_error": max(errors) if errors else None,
      "median_abs_error": statistics.median(errors) if errors else None,
      "target": TARGET_ABS_ERROR,
      "inputs": {"results_dir": results_dir, "setup": setup,
                 "sparse": [{"name": t.name, "nbytes": t.nbytes,
                             "values_nbytes": t.sparse.values_nbytes,
                             "indices_nbytes": t.sparse.indices_nbytes}
                            for t in base_dag.tensors
                            if t.sparse is not None],
                 "disturbed_traces": sorted(disturbed),
                 "compute": compute_source, "compute_scale": scale,
                 "cost_model": cost.to_dict(), "cost_source": cost_source,
                 "cpu_cost": None if cpu is None else cpu.to_dict(),
                 "cpu_source": cpu_source,
                 "order_penalty": [list(p) for p in penalty],
                 "order_penalty_source": penalty_source,
                 "settings": {"cost_fallback": cost_fallback,
                              "cpu_cost": cpu_cost,
                              "comm_cpu_share": comm_cpu_share,
                              "bytes_cpu_share": bytes_cpu_share,
                              "block_overhead_ms": block_overhead_ms,
                              "block_startup_ms": block_startup_ms,
                              "forward_share": forward_share,
                              "reference": reference,
                              "order_penalty": order_penalty},
                 "measured_compute_s": results["compute_s"],
                 "measured_comm_s": results["comm_s"],
                 "simulated_comm_s": float(execution.repeated_seconds(
                     cost, total_bytes, alone)),
                 "link": {"rate": setup["link_rate"],
                          "burst_bytes": link_burst_bytes(setup["link_rate"]),
                          "burst_s": link_burst,
                          "cpu_bound": bool(link_burst) and cpu is cost}},
      "missing": missing,
  }


def _ms(x: Optional[float], fmt: str = "{:.1f}") -> str:
  return "-" if x is None else fmt.format(x * 1e3)


def format_table(report: Dict[str, Any]) -> str:
  """A markdown table of `validate`'s result, with its inputs."""
  inputs = report["inputs"]
  s = inputs["setup"]
  cpu = inputs["cpu_cost"]
  link = inputs["link"]
  lines = [
      f"Simulator vs measured: {s['model']}, {s['workers']} workers, global "
      f"batch {s['global_batch_size']} ({inputs['results_dir']}).",
      "",
      f"- Per-op times: {inputs['compute']}.",
      f"- Cost of a collective alone: alpha "
      f"{inputs['cost_model']['alpha'] * 1e3:.3f} ms, beta "
      f"{inputs['cost_model']['beta'] * 1e9:.3f} ns/B "
      f"({inputs['cost_source']}); whole gradient "
      f"{inputs['simulated_comm_s'] * 1e3:.1f} ms simulated vs "
      f"{inputs['measured_comm_s'] * 1e3:.1f} ms measured alone.",
      "- Link: " + (
          f"rate {link['rate']}, a token bucket (tc tbf, as "
          f"tf_preempt.launch.netem sets it) of {link['burst_bytes']} B, "
          f"{link['burst_s'] * 1e3:.3f} ms of traffic" + (
              "; inert here: the bytes are taken as CPU-bound (the CPU "
              "cost is this link's own), at the rate with or without "
              "tokens" if link.get("cpu_bound") else "")
          if link["burst_s"] else
          f"{link['rate'] or 'loopback or unknown'}, a plain rate (no token "
          "bucket)") + ".",
      "- CPU cost of a collective on the compute core: " +
      ("none" if cpu is None else
       f"{cpu['alpha'] * 1e3:.3f} ms + {cpu['beta'] * 1e9:.3f} ns/B") +
      f" ({inputs['cpu_source']}).",
      "- Penalty of a collective that task 0 reaches last (two workers; "
      "seconds of traffic by which a rank's half exceeds the bucket -> "
      "extra seconds, from scripts/bench_arrival_order.py): " +
      (", ".join(f"{x * 1e3:.1f} -> {y * 1e3:.1f} ms"
                 for x, y in inputs["order_penalty"]) or "none") +
      f" ({inputs['order_penalty_source']}); weighted per row by the share "
      "of blocks task 0 started late in the other rows' traces of its K "
      "and kind, fused or one collective per tensor (late0).",
      "- Sparse gradients (IndexedSlices; not in the plans or the traces; "
      "all-gathered after each step's dense collectives: the row count, "
      "then rows and indices): " +
      ("none" if not inputs["sparse"] else "; ".join(
          f"{t['name']} ({t['nbytes']} B dense): {t['values_nbytes']} B "
          f"of rows + {t['indices_nbytes']} B of indices per worker"
          for t in inputs["sparse"])) + ".",
      "- Settings: " + ", ".join(f"--{k}={v}" for k, v in
                                 inputs["settings"].items()) + ".",
      "- Per row (execution model): K, credit, and the leave-one-out "
      "measurements from the other rows' traces: forward share of compute "
      "(fwd), the CPU part of a collective's fixed cost (cpu; alpha is "
      "raised to it where the fit is below), the core share of a "
      "collective while compute runs (share), the per-block overhead "
      "(ovh: a block's end less its last traced collective's end, less "
      "the modelled sparse all-gathers that follow that collective; a part "
      "per K and one per tensor of the row's last collective) and the "
      "block's start-up before its first op (su, per K). colls: the "
      "plan's collectives the runtime issues.",
      "- Traces of disturbed runs (more than 10% slower than their row's "
      "fastest repeat), used for no calibration: " +
      (", ".join(inputs["disturbed_traces"]) or "none") + ".",
      "",
      f"Measured: each row's {inputs['settings']['reference']} repeat.",
      "",
      "| row | measured ms | predicted ms | error | planner model ms | "
      "colls | plan | fwd | cpu / alpha ms | share | ovh ms | su ms | "
      "late0 | note |",
      "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
  ]
  for name, r in report["rows"].items():
    err = "-" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
    c = r.get("calibration") or {}
    fwd = ("-" if c.get("forward_share") is None else
           f"{c['forward_share']:.2f}")
    share = ("-" if c.get("comm_cpu_share") is None else
             f"{c['comm_cpu_share']:.3f}")
    late = ("-" if c.get("task0_late_share") is None else
            f"{c['task0_late_share']:.2f}")
    lines.append(
        f"| {name} | {r['measured_s'] * 1e3:.1f} | {_ms(r['predicted_s'])} "
        f"| {err} | {_ms(r.get('planner_model_s'))} | "
        f"{r.get('collectives', '-')} | {r.get('plan', '-')} | {fwd} | "
        f"{_ms(c.get('cpu_fixed_s'), '{:.2f}')} / "
        f"{_ms(c.get('alpha_s'), '{:.2f}')} | "
        f"{share} | {_ms(c.get('block_overhead_s'))} | "
        f"{_ms(c.get('block_startup_s'))} | {late} | "
        f"{r.get('note', '')} |")
  worst = report["max_abs_error"]
  if worst is not None:
    verdict = "meets" if worst <= report["target"] else "misses"
    within = sum(1 for r in report["rows"].values()
                 if r["error"] is not None and
                 abs(r["error"]) <= report["target"])
    total = sum(1 for r in report["rows"].values() if r["error"] is not None)
    lines += ["", f"max |error| {worst * 100:.1f}% ({verdict} the "
              f"{report['target'] * 100:.0f}% target; {within} of {total} "
              f"rows within it); median "
              f"{report['median_abs_error'] * 100:.1f}%."]
  if report["missing"]:
    lines += ["", "Not recorded by the benchmark (stand-ins used above):"]
    lines += [f"- {m}" for m in report["missing"]]
  return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> None:
  if len(argv) != 2:
    raise app.UsageError("Usage: validate_sim.py RESULTS_DIR [--json]")
  results_dir = argv[1]
  if not os.path.isfile(os.path.join(results_dir, "results.json")):
    raise app.UsageError(f"{results_dir}/results.json does not exist.")
  # stdout carries the table or the one JSON object.
  with contextlib.redirect_stdout(sys.stderr):
    report = validate(results_dir, gpu=FLAGS.gpu, reference=FLAGS.reference,
                      cost_fallback=FLAGS.cost_fallback,
                      cpu_cost=FLAGS.cpu_cost,
                      comm_cpu_share=FLAGS.comm_cpu_share,
                      bytes_cpu_share=FLAGS.bytes_cpu_share,
                      block_overhead_ms=FLAGS.block_overhead_ms,
                      block_startup_ms=FLAGS.block_startup_ms,
                      forward_share=FLAGS.forward_share,
                      order_penalty=FLAGS.order_penalty)
  table = format_table(report)
  out = (os.path.join(results_dir, "validation.md") if FLAGS.out is None
         else FLAGS.out)
  if out:
    with open(out, "w") as f:
      f.write(table)
  if FLAGS.json:
    print(json.dumps(report, sort_keys=True))
  else:
    print(table, end="")


if __name__ == "__main__":
  define_flags()
  app.run(main)
