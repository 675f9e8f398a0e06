"""What the probes beside a results directory measured, as model inputs.

The penalty of a collective released alone (what
`scripts/bench_arrival_order.py` measured it to take with task 0 or task 1
reaching it last, mixed by how often task 0 started a block late in the
traces, beyond the model's own time for it), task 0's start lags in the
two workers' traces, and the CPU cost of a collective on the compute
core (`scripts/bench_contention.py`, else a collective's cost alone on a
CPU-bound link), the training step's profile
(`scripts/bench_step_profile.py`: each layer's share of the step, the
share that reads no weight) and, for the share of a later step that runs
early, the step phases of real runs and the block head of the
directory's machine (`early_share`): `ExecutionModel`'s `order_penalty`,
`cpu` and `early_compute`, and the DAG's per-op times. Pure Python; the planner,
netem and the timeline on first use.

"auto" takes only probes run in the directory's heap mode
(`results_files.heap_mode`; the probes record theirs, and None, from
before `--heap`, matches None): TensorFlow's 128 KiB mmap threshold adds
page faults to every collective, so probes in another mode measure
another collective. Nor does it take probes, or a CPU-bound sibling
directory, recorded on another machine (`results_files.machine_identity`):
a collective's CPU cost is the machine's, and per byte on 6 December's VM
it was 2.3x that of 4 December's, both "AMD EPYC". Of the rest, those
recorded on the directory's machine come before those from before the
probes recorded it; then the newest. A runs.jsonl whose runs recorded
different machines (or some none) is taken for none: keep one probe
session per file.
"""

import glob
import json
import math
import os
import statistics
from typing import (Any, Callable, Collection, Dict, List, Optional,
                    Sequence, Tuple)

from tf_preempt.bench import collective_cost
from tf_preempt.bench import emulated_link
from tf_preempt.bench import results_files

# Where `--order_penalty=auto` looks, beside the results directory.
ARRIVAL_ORDER_GLOB = "*arrival-order*/runs.jsonl"
# Where `--cpu_cost=auto` looks first: scripts/bench_contention.py --out.
CONTENTION_GLOB = "*contention*/cpu_cost.json"
# Where the step profiles are looked up: scripts/bench_step_profile.py --out.
STEP_PROFILE_GLOB = "*step-profile*/step_profile.json"
# Where the block heads are looked up: scripts/bench_block_head.py --out.
BLOCK_HEAD_GLOB = "*block-head*/block_head.json"
# Where the steps' phases in two-worker runs are looked up first:
# scripts/bench_step_phases.py --out.
STEP_PHASES_GLOB = "*step-phases*/step_phases.json"
# A training block's start lags its peer's by 1.5-3 ms in the traces; a
# probe's longer sleep finds the peer's collective further on (and, in
# heap mode "tensorflow", a slower one).
MAX_LATE_MS = 4.0
# Links at least this fast make the gRPC ring CPU-bound on this testbed.
CPU_BOUND_BITS_PER_S = 1e9


def arrival_points(runs: Sequence[Dict[str, Any]], link_rate: Optional[str]
                   ) -> Tuple[Tuple[float, float, float, float], ...]:
  """What a collective released alone took, by which task reached it last.

  From scripts/bench_arrival_order.py (two workers). A run on an emulated
  link of rate `link_rate` with the default token bucket and namespaces,
  whose late task slept (`--late_by=sleep`, the default; runs from before
  the flag have no "late_by") at most `MAX_LATE_MS`, gives a point: the
  excess of a rank's half of the bytes over the bucket, in seconds of
  traffic at the rate, the bytes, and the seconds from the last arrival to
  the collective's end when task 0 was late and when task 1 was. Points of
  one excess are averaged.

  Args:
    runs: its `--json` lines.
    link_rate: the link rate of the directory being modelled (a netem rate
      such as "2gbit"); a probe at another rate measures another link.

  Returns:
    The points of positive excess, sorted.
  """
  from tf_preempt.launch import netem  # pylint: disable=g-import-not-at-top
  by_excess = {}
  for run in runs:
    rate = run.get("bandwidth")
    groups = run.get("by_late_task") or {}
    burst = emulated_link.link_burst_bytes(rate)
    if (burst is None or rate != link_rate or
        run.get("burst_bytes") is not None or
        run.get("reverse_namespaces") or
        run.get("late_by", "sleep") != "sleep" or
        run.get("late_ms", 0.0) > MAX_LATE_MS or
        not {"task 0", "task 1"} <= set(groups)):
      continue
    excess = (run["nbytes"] / 2 - burst) / (netem.parse_rate(rate) / 8)
    if excess <= 0:
      continue
    by_excess.setdefault(round(excess, 9), []).append(
        (run["nbytes"], groups["task 0"]["from_last_ms"] * 1e-3,
         groups["task 1"]["from_last_ms"] * 1e-3))
  return tuple((x,) + tuple(statistics.fmean(column) for column in zip(*v))
               for x, v in sorted(by_excess.items()))


def order_penalty(points: Sequence[Tuple[float, float, float, float]],
                  task0_late_share: float, cost: Any, model: Any
                  ) -> Tuple[Tuple[float, float], ...]:
  """`ExecutionModel.order_penalty` (at weight 1) from `arrival_points`.

  A block's first collective released alone on an idle core takes, from
  the last arrival, what the probe measured with the workers arriving in
  the order of the blocks' starts: task 0 late with probability
  `task0_late_share`, else task 1 (either way the peer waits in the
  collective). The penalty is how much longer that is than the model's
  own time for a collective alone (`execution.lone_seconds`), at least 0.

  Args:
    points: `arrival_points`.
    task0_late_share: the share of blocks task 0 started late, in [0, 1].
    cost: the row's `CostModel`.
    model: the row's `ExecutionModel` (its `cpu` and `link_burst`).

  Returns:
    Points (excess, seconds), sorted as `points`.
  """
  from tf_preempt.plan import execution  # pylint: disable=g-import-not-at-top
  w = task0_late_share
  return tuple(
      (x, max(0.0, w * task0_s + (1 - w) * task1_s -
              execution.lone_seconds(cost, nbytes, model)))
      for x, nbytes, task0_s, task1_s in points)


def _machine_rank(machines: Collection[Optional[str]],
                  machine: Optional[str]) -> Optional[int]:
  """How a probe whose runs were on `machines` fits a directory measured
  on `machine` (both `results_files.machine_identity`): 1 if every run
  was on it, 0 if none recorded its machine, None otherwise."""
  machines = set(machines)
  if machines == {None}:
    return 0
  return 1 if machine is not None and machines == {machine} else None


def _speed_fit(probe_speed: Optional[float], speed: Optional[float]
               ) -> float:
  """How a probe's speed reading fits a directory's (ms per matmul of
  `speed_worker`'s chain; None: not read), higher is better: minus the
  distance of their logarithms if both were read; a probe without one
  after every probe with one; for a directory without one, probes
  without one first (a probe run on a host of unknown speed stays the
  input of the directories validated with it)."""
  # A reading that is not positive is no reading.
  probe_speed = probe_speed if probe_speed and probe_speed > 0 else None
  speed = speed if speed and speed > 0 else None
  if speed is None:
    return 0.0 if probe_speed is None else -1.0
  if probe_speed is None:
    return -math.inf
  return -abs(math.log(probe_speed / speed))


def _auto_probe(results_dir: str, pattern: str,
                describe: Callable[[str], Optional[Tuple[List[Optional[str]],
                                                         Optional[float]]]],
                machine: Optional[str], speed: Optional[float]
                ) -> Optional[str]:
  """The best probe file matching `pattern` beside `results_dir`.

  Args:
    results_dir: the directory being validated.
    pattern: a glob in its parent.
    describe: of a probe's path, (the machine identities its runs
      recorded, its speed reading or None) if it fits the directory
      otherwise (link, heap mode), else None.
    machine: the directory's `results_files.machine_identity`.
    speed: the directory's speed reading, or None.

  Returns:
    The path of the highest `_machine_rank`, then the best `_speed_fit`,
    then the newest name; None if no probe fits or is of its machine or
    of none recorded.
  """
  parent = os.path.dirname(os.path.abspath(results_dir))
  ranked = []
  for path in glob.glob(os.path.join(parent, pattern)):
    described = describe(path)
    if described is not None:
      machines, probe_speed = described
      rank = _machine_rank(machines, machine)
      if rank is not None:
        ranked.append((rank, _speed_fit(probe_speed, speed), path))
  return max(ranked)[2] if ranked else None


def probe_speed(results_dir: str, source: str) -> Optional[float]:
  """The speed reading of the probe `source` names beside `results_dir` (a
  cpu_cost.json or a runs.jsonl, as `cpu_cost_model` and
  `order_penalty_runs` name them, or a results directory's
  cost_model.json, read with its details.json), None if it has none or
  is no file."""
  path = os.path.join(os.path.dirname(os.path.abspath(results_dir)), source)
  if not os.path.isfile(path):
    return None
  if path.endswith(".jsonl"):
    return _runs_speed(_read_runs(path))
  if os.path.basename(path) == "cost_model.json":
    # A CPU-bound sibling's cost: scripts/bench.py read its speed.
    path = os.path.join(os.path.dirname(path), "details.json")
  return (results_files.read_json(path) or {}).get("speed_ms_per_matmul")


def _runs_speed(runs: Sequence[Dict[str, Any]]) -> Optional[float]:
  """The median speed reading of a probe's runs, None if none has one."""
  speeds = [r["speed_ms_per_matmul"] for r in runs
            if r.get("speed_ms_per_matmul")]
  return statistics.median(speeds) if speeds else None


def _read_runs(path: str) -> List[Dict[str, Any]]:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def order_penalty_runs(results_dir: str, source: str,
                       heap: Optional[str] = None,
                       machine: Optional[str] = None,
                       speed: Optional[float] = None
                       ) -> Tuple[List[Dict[str, Any]], str]:
  """The arrival-order runs `--order_penalty` names, and their path.

  Args:
    results_dir: the directory being validated.
    source: "none", "auto" (the `ARRIVAL_ORDER_GLOB` beside it whose runs
      were in heap mode `heap`, on its machine before unrecorded ones,
      then of the nearest speed, `_speed_fit`, then the newest) or a
      runs.jsonl path.
    heap: the directory's `results_files.heap_mode`.
    machine: the directory's `results_files.machine_identity`.
    speed: the directory's speed reading ("speed_ms_per_matmul" of
      `results_files.benchmark_setup`).

  Raises:
    ValueError: if `source` is a path that does not exist.
  """
  if source == "none":
    return [], "none"
  if source == "auto":

    def describe(path):
      runs = _read_runs(path)
      if {r.get("heap") for r in runs} != {heap}:
        return None
      return ([results_files.machine_identity(r.get("machine"))
               for r in runs], _runs_speed(runs))

    source = _auto_probe(results_dir, ARRIVAL_ORDER_GLOB, describe, machine,
                         speed)
    if source is None:
      return [], (f"none: no {ARRIVAL_ORDER_GLOB} of heap mode {heap} "
                  f"beside the directory whose runs all recorded its "
                  f"machine ({machine or 'not recorded'}) or all none")
  if not os.path.isfile(source):
    raise ValueError(f"order_penalty={source!r}: no such file")
  return _read_runs(source), os.path.relpath(
      source, os.path.dirname(os.path.abspath(results_dir)))


def start_lags(results_dir: str, traces: Dict[str, Dict[str, Any]]
               ) -> Dict[str, Dict[int, float]]:
  """Per two-worker trace pair: {block's "batch": seconds task 0 started
  it after task 1 (0 if not after)}, every block both traces have.

  Args:
    results_dir: the results directory (worker 1's traces are read here).
    traces: worker 0's traces by file name
      (`results_files.worker0_traces`).
  """
  from tf_preempt.bench import timeline  # pylint: disable=g-import-not-at-top
  out = {}
  for name, pair in _two_worker_traces(results_dir, traces):
    blocks = timeline.block_skews(pair,
                                  unroll=results_files.trace_unroll(name))
    if blocks:
      out[name] = {b["batch"]: b["start_skew_s"][0] for b in blocks}
  return out


def first_collective_in_situ(results_dir: str,
                             traces: Dict[str, Dict[str, Any]],
                             first_iteration: int) -> Dict[str, float]:
  """Per two-worker trace pair: the median seconds from the last worker's
  arrival to the end of the first collective of a block's first step,
  over the blocks whose first step is `first_iteration` or later.

  What a block's first collective took in the training run itself, with
  the workers arriving as they did (`timeline.collective_arrivals`): for a
  row that reduces the whole gradient in one collective after the
  backward pass, the in-situ time of a collective released alone. Only
  a block's first step counts: its workers arrive as the blocks start
  (the later steps' collectives follow their peers' within the block).

  Args:
    results_dir: the results directory (worker 1's traces are read here).
    traces: worker 0's traces by file name
      (`results_files.worker0_traces`), K in the name, the compute
      blocks' "batch" (a block's last step) in their args.
    first_iteration: the first step counted (tracing and warm-up before).

  Returns:
    {trace name: seconds}, the pairs with such collectives.
  """
  from tf_preempt.bench import timeline  # pylint: disable=g-import-not-at-top
  out = {}
  for name, pair in _two_worker_traces(results_dir, traces):
    k = results_files.trace_unroll(name)
    first_steps = {e["args"]["batch"] - (k - 1)
                   for e in pair[0].get("traceEvents", ())
                   if e.get("cat") == "compute" and
                   "batch" in (e.get("args") or {})}
    times = [a["from_last_s"] for a in timeline.collective_arrivals(pair)
             if a["collective_id"] == 0 and a["iteration"] in first_steps
             and a["iteration"] >= first_iteration]
    if times:
      out[name] = statistics.median(times)
  return out


def _two_worker_traces(results_dir: str, traces: Dict[str, Dict[str, Any]]
                       ) -> List[Tuple[str, List[Dict[str, Any]]]]:
  """(name, [worker 0's trace, worker 1's]) of every trace of a run with
  exactly two workers, in name order."""
  out = []
  for name, trace in sorted(traces.items()):
    other = os.path.join(results_dir, "traces",
                         name.replace(".worker-0.", ".worker-1."))
    peer = results_files.read_json(other)
    if peer is not None and not os.path.isfile(
        other.replace(".worker-1.", ".worker-2.")):
      out.append((name, [trace, peer]))
  return out


def _timed_lags(lags: Dict[str, Dict[int, float]], name: str,
                first_step: int) -> List[float]:
  """Trace `name`'s lags (of `start_lags`) of the blocks from `first_step`
  on (a block's "batch" is its last step)."""
  k = results_files.trace_unroll(name)
  return [lag for batch, lag in lags[name].items()
          if batch - (k - 1) >= first_step]


def _of_unroll(trace_names: Collection[str], unroll: int) -> List[str]:
  """The traces named of unroll `unroll`, or all of them if none is."""
  return [n for n in trace_names
          if results_files.trace_unroll(n) == unroll] or list(trace_names)


def late_counts(lags: Dict[str, Dict[int, float]], first_step: int
                ) -> Dict[str, Tuple[int, int, int]]:
  """Per trace of `start_lags`: (K, blocks task 0 started late
  (`timeline.LATE_START_S` after task 1), blocks), from `first_step` on;
  traces without such blocks left out."""
  from tf_preempt.bench import timeline  # pylint: disable=g-import-not-at-top
  out = {}
  for name in lags:
    timed = _timed_lags(lags, name, first_step)
    if timed:
      out[name] = (results_files.trace_unroll(name),
                   sum(lag > timeline.LATE_START_S for lag in timed),
                   len(timed))
  return out


def expected_lag(lags: Dict[str, Dict[int, float]],
                 trace_names: Collection[str], unroll: int,
                 first_step: int) -> Optional[float]:
  """Task 0's mean start lag over the blocks from `first_step` on of the
  traces named (of `start_lags`) of unroll `unroll`, or of any unroll if
  none is; None without such traces.

  A mean, as a step time is: a block that lags by tens of milliseconds
  adds them to its step. (The share of late blocks times their median
  lag left 4 directories fewer within the target.)
  """
  values = [lag for n in _of_unroll([n for n in trace_names if n in lags],
                                    unroll)
            for lag in _timed_lags(lags, n, first_step)]
  return statistics.fmean(values) if values else None


def late_start_share(counts: Dict[str, Tuple[int, int, int]],
                     trace_names: Collection[str], unroll: int
                     ) -> Optional[float]:
  """The share of blocks task 0 started late over the traces named (of
  `late_counts`) of unroll `unroll`, or of any unroll if none is; None
  without such traces."""
  alike = [counts[n] for n in _of_unroll(
      [n for n in trace_names if n in counts], unroll)]
  total = sum(c[2] for c in alike)
  return sum(c[1] for c in alike) / total if total else None


def cpu_cost_model(results_dir: str, setup: Dict[str, Any], cost,
                   total_bytes: int, source: str = "auto"):
  """(CPU cost of a collective or None, where it came from).

  Args:
    results_dir: the directory being validated.
    setup: its `results_files.benchmark_setup`.
    cost: its cost model of a collective alone.
    total_bytes: the model's gradient bytes.
    source: "none"; "auto" (the `contention_cost` of the directory's
      link, worker count, heap mode and machine beside it; else this
      directory's `cost` if its link is CPU-bound, else the fastest
      CPU-bound sibling directory of the same worker count and machine
      (`_fastest_cpu_bound_sibling`), else none); or a results
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
    return plan_lib.CostModel.from_dict(results_files.read_json(path)), name
  results = results_files.read_json(os.path.join(source, "results.json"))
  if results is None:
    raise ValueError(f"cpu_cost={source!r}: no cost_model.json or "
                     "results.json there")
  alpha = min(collective_cost.GRPC_ALPHA_S, results["comm_s"])
  return (plan_lib.CostModel(alpha=alpha, beta=(results["comm_s"] - alpha) /
                             total_bytes),
          f"{os.path.dirname(name)}: alpha {alpha * 1e3:.1f} ms (testbed), "
          "beta from its comm_s")


def contention_cost(results_dir: str, setup: Dict[str, Any]
                    ) -> Optional[str]:
  """The `CONTENTION_GLOB` beside `results_dir` measured on its link rate
  with its worker count (bench_contention runs 2) in its heap mode, on its
  machine before unrecorded ones, then of the nearest speed to the
  setup's "speed_ms_per_matmul" (`_speed_fit`), then the newest; or
  None."""
  rate = setup.get("link_bits_per_s")
  if rate is None or setup.get("workers") != 2:
    return None

  def describe(path):
    probe = results_files.read_json(path) or {}
    # The matmul chain's probes only (before --compute they had no
    # "compute"): the model-pass probe is a trial, taken when named.
    if (emulated_link.link_bits_per_s(probe.get("bandwidth") or "") != rate
        or probe.get("heap") != setup.get("heap")
        or not str(probe.get("compute", "chain")).startswith("chain")):
      return None
    return ([results_files.machine_identity(probe.get("machine"))],
            probe.get("speed_ms_per_matmul"))

  return _auto_probe(results_dir, CONTENTION_GLOB, describe,
                     setup.get("machine"), setup.get("speed_ms_per_matmul"))


def _fastest_cpu_bound_sibling(results_dir: str, setup: Dict[str, Any]
                               ) -> Optional[str]:
  """The sibling results directory of the same worker count on the fastest
  link of at least CPU_BOUND_BITS_PER_S, on the directory's machine before
  one that recorded none, never on another (on a tie: one with a
  cost_model.json, then the same model, then the newest name), or
  None."""
  best = None
  parent = os.path.dirname(os.path.abspath(results_dir))
  for path in sorted(glob.glob(os.path.join(parent, "*", "results.json"))):
    other = os.path.dirname(path)
    other_setup = results_files.benchmark_setup(
        results_files.read_json(path), {})
    rate = other_setup["link_bits_per_s"]
    # The CPU cost of a collective is the machine's and the ring's (worker
    # count), not the model's.
    rank = _machine_rank([other_setup["machine"]], setup.get("machine"))
    if (rate is None or rate < CPU_BOUND_BITS_PER_S or rank is None or
        other_setup["workers"] != setup["workers"]):
      continue
    # Its machine; the fastest link; on a tie, one with a
    # cost_model.json, then the same model, then the newest name.
    key = (rank, rate,
           os.path.isfile(os.path.join(other, "cost_model.json")),
           other_setup["model"] == setup["model"], os.path.basename(other))
    if best is None or key > best[0]:
      best = (key, other)
  return None if best is None else best[1]


def _step_profile(results_dir: str, model: str
                  ) -> Tuple[Optional[Dict[str, Any]], str]:
  """(`model`'s summary in the newest `STEP_PROFILE_GLOB` beside
  `results_dir` that has it, its description), or (None, why not)."""
  parent = os.path.dirname(os.path.abspath(results_dir))
  for path in sorted(glob.glob(os.path.join(parent, STEP_PROFILE_GLOB)),
                     reverse=True):
    measured = ((results_files.read_json(path) or {}).get("models") or
                {}).get(model)
    if measured:
      return measured, (
          f"{os.path.relpath(path, parent)}, median of "
          f"{len(measured['shares'])} runs at a batch of "
          f"{measured['per_worker_batch']} per worker")
  return None, f"none: no {STEP_PROFILE_GLOB} beside the results has {model}"


def early_share(results_dir: str, model: str,
                machine: Optional[str] = None,
                per_worker_batch: Optional[int] = None,
                heap: Optional[str] = None,
                link_rate: Optional[str] = None,
                workers: Optional[int] = None) -> Tuple[float, str]:
  """(Share of a step that a block's later steps run at its start, where
  it came from).

  How the executor orders two steps' ready ops on one core is the
  machine's, so only probes run on the directory's machine (`machine`)
  at its batch per worker are taken, in this order:

  1. The step phases (`STEP_PHASES_GLOB`, scripts/bench_step_phases.py),
     in the directory's heap mode, on its link and with its workers: in
     runs like the
     benchmark's, how much shorter the second step of a K = 2 block is,
     from its first layer's update to its loss, than a K = 1 block's
     forward pass, over the K = 1 step's compute.
  2. The block head (`BLOCK_HEAD_GLOB`, scripts/bench_block_head.py): in
     the compute alone (one process), how much later a K = 2 block's
     first step reaches its loss than a K = 1 block's (each over its own
     step).
  3. The step profile's share of a step's ops that read no weight
     (dropout's masks; `_step_profile`, of any machine).

  Of several probes of one kind, the one of the most repeats for the
  model (the repeats spread widely), then the newest directory name.

  Args:
    results_dir: the directory being validated.
    model: its model's name.
    machine: the directory's `results_files.machine_identity`, or None
      (then only the step profile is taken).
    per_worker_batch: the directory's batch of one worker, or None (then
      a probe of any batch is taken).
    heap: the directory's heap mode (`results_files.heap_mode`); the step
      phases of another mode are not taken.
    link_rate: the directory's emulated link rate ("2gbit"), or None for
      loopback; the step phases of another link are not taken.
    workers: the directory's worker count; the step phases of another
      count are not taken.

  Returns:
    The share and a description; (0.0, why) if no probe has it.
  """
  parent = os.path.dirname(os.path.abspath(results_dir))
  bits = emulated_link.link_bits_per_s(link_rate or "")

  def same_runs(measured):  # the link by its rate, as contention_cost
    return ((measured.get("heap"), measured.get("workers"),
             emulated_link.link_bits_per_s(measured.get("bandwidth") or ""))
            == (heap, workers, bits))

  phases = _machine_probe(parent, STEP_PHASES_GLOB, model, machine,
                          per_worker_batch, same_runs)
  if phases is not None:
    path, measured = phases
    return float(measured["early_share"]), (
        f"the step phases: {os.path.relpath(path, parent)}, median of "
        f"{len(measured['shares'])} repeats of {measured['workers']}-worker "
        f"runs at a batch of {measured['per_worker_batch']} per worker, on "
        "this machine")
  head = _machine_probe(parent, BLOCK_HEAD_GLOB, model, machine,
                        per_worker_batch)
  if head is not None:
    path, measured = head
    return float(measured["delay_share"]), (
        f"the block head: {os.path.relpath(path, parent)}, median of "
        f"{len(measured['shares'])} repeats at a batch of "
        f"{measured['per_worker_batch']} per worker, on this machine")
  measured, source = _step_profile(results_dir, model)
  if measured is None:
    return 0.0, source
  return float(measured["early_share"]), (
      f"{source}: the ops that read no weight; no {STEP_PHASES_GLOB} or "
      f"{BLOCK_HEAD_GLOB} of this machine")


def _machine_probe(parent: str, pattern: str, model: str,
                   machine: Optional[str], per_worker_batch: Optional[int],
                   accept: Callable[[Dict[str, Any]], bool] = lambda m: True
                   ) -> Optional[Tuple[str, Dict[str, Any]]]:
  """(path, the model's summary) of the per-model probe file matching
  `pattern` in `parent` that was run on `machine` at `per_worker_batch`
  and whose summary `accept`s: of the most repeats ("shares"), then the
  newest directory name; None if none (or `machine` is None)."""
  if machine is None:
    return None
  found = []
  for path in glob.glob(os.path.join(parent, pattern)):
    probe = results_files.read_json(path) or {}
    measured = (probe.get("models") or {}).get(model)
    if (measured and
        results_files.machine_identity(probe.get("machine")) == machine and
        per_worker_batch in (None, measured["per_worker_batch"]) and
        accept(measured)):
      found.append((len(measured["shares"]),
                    os.path.basename(os.path.dirname(path)), path, measured))
  if not found:
    return None
  _, _, path, measured = max(found)
  return path, measured


def layer_shares(results_dir: str, model: str
                 ) -> Tuple[Optional[Dict[str, float]], str]:
  """(Each DAG op's share of the layers' time, where it came from).

  Args:
    results_dir: the directory being validated.
    model: its model's name.

  Returns:
    {"LAYER/forward" or "LAYER/backward": median share} that
    `scripts/bench_step_profile.py` measured for `model` (`_step_profile`)
    and a description; (None, why) if none has them.
  """
  measured, source = _step_profile(results_dir, model)
  if measured is None or not measured.get("layer_shares"):
    return None, source
  return {k: float(v) for k, v in measured["layer_shares"].items()}, source
