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
  `collective_cost.GRPC_ALPHA_S`, the fixed cost of one collective measured
  alone on this testbed, and beta from `comm_s` (all gradient bytes in one all-reduce,
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
  - early_compute: the share of a step that a K = 2 block's second step
    does not wait for (`probe_inputs.early_share`): measured in
    two-worker runs by scripts/bench_step_phases.py on the directory's
    machine, at its batch per worker, in its heap mode, on its link and
    with its worker count (of the
    `probe_inputs.STEP_PHASES_GLOB` beside it, the one of the most
    repeats, then the newest), how much shorter the second step is from
    its first layer's update to its loss than a K = 1 block's forward
    pass; else the share by which a K = 2 block's first step reaches its
    loss later than a K = 1 block's in the compute alone
    (scripts/bench_block_head.py, `probe_inputs.BLOCK_HEAD_GLOB`, of the
    same machine and batch); else the share of a training step's compute
    that reads no weight (dropout's random masks), measured by
    scripts/bench_step_profile.py (the newest
    `probe_inputs.STEP_PROFILE_GLOB` beside the directory that has its
    model); times the step's compute;
    in a block the later steps' runs at its start, and the heads the
    start-ups are fitted to are taken less it; with
    --input_work=startups (a check, not the default), also the start-up's
    growth per later step over K=1's (`trace_calibration.
    input_work_per_step`), the start-ups refitted with it; with
    --input_work=gaps (a check too), that growth at most as much as the
    other rows' modelled gaps before a block's second step exceed their
    traces' (a second pass, `_gap_excess`);
  - CPU cost of a collective on the compute core (--cpu_cost): what a
    concurrent all-reduce took from a chain of matmuls on the worker's
    core, measured on the directory's link by scripts/bench_contention.py
    (the newest `probe_inputs.CONTENTION_GLOB` beside the directory with
    its rate, heap mode and machine, `probe_inputs.contention_cost`; 2
    workers); without one, the old upper bound: the cost model of a
    directory whose link is fast enough that communication looked
    CPU-bound (>= 1 Gbit/s; the directory itself, or the fastest such
    sibling with the same worker count and machine), all of a
    collective's time alone there taken as CPU work. On an idle core the
    fixed CPU work of the collectives in flight is served one at a time
    in release order
    (`fixed_cpu_fifo`; the CPU part below is measured as exactly that);
  - the arrival-order penalty (--order_penalty; 2 workers on an emulated
    link): what a stock all-reduce released alone takes when task 0, or task
    1, reaches it last, measured by scripts/bench_arrival_order.py (the
    newest `probe_inputs.ARRIVAL_ORDER_GLOB` beside the directory of its
    heap mode and machine; its runs at the directory's link rate, late by at
    most `probe_inputs.MAX_LATE_MS`) against the seconds of traffic by which
    a rank's half exceeds the bucket, the two mixed by the share of blocks
    task 0 started late (`late_start_share`) in both workers' traces of the
    other rows of the row's K and kind (fused, or one collective per tensor:
    `per_tensor_collectives`), less the model's own time for the collective
    alone (`probe_inputs.order_penalty`);
  - the inputs measured alone (the cost of a collective, its CPU cost and
    the arrival-order points; --lone_collective) checked against the
    training run: where the other rows that reduce the whole dense
    gradient in one collective after the backward pass show it taking, from
    the last worker's arrival (`probe_inputs.first_collective_in_situ`),
    more than `LONE_TOLERANCE` longer or shorter than the model gives it
    as they ran (`_lone_ratio`), the three are scaled by one factor until
    the two agree;
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
    are not traced; 0 without sparse gradients) as a part per K plus the
    updates still queued when the block's last collective ends (a tensor's
    update, the fused buffer's unpacking and the optimizer, follows the
    collective that completes it, one at a time on the core; seconds per
    tensor: `update_backlog`), by least absolute deviations
    (`lad_fit_terms`). With both workers' traces, each tail is taken
    less the next block's start lag of task 0 (worker 0's tail is longer
    than worker 1's by it) and the row gets the mean lag of the other
    rows' blocks of its K and kind instead (`start_lags`,
    `expected_lag`): the lag goes with the kind of row (1.5-3 ms in the
    fused rows, about 0 in chains of one collective per tensor), not
    with its last collective's tensors. The start-up (per K) and the forward share
    are fitted the same way to the other rows' block heads (a block's
    start to its first ready gradient), knowing where in the backward
    pass each row's first collective becomes ready (`fit_block_head`,
    `first_ready_fraction`).

The pieces are in `tf_preempt.bench` (pure Python), one job each:
`results_files` reads the directory (its JSON files, worker 0's traces,
the benchmark's setup), `emulated_link` its link's rate and token bucket,
`collective_cost` the cost of a collective alone (`fit_alone`),
`probe_inputs` the probes' CPU cost and arrival-order penalty
(`late_start_share`), `trace_calibration` the leave-one-out figures and
fits (`lad_fit`, `fit_block_head`), `row_plans` each row's plan and what
the runtime issues of it (`per_tensor_collectives`, `model_tail`,
`first_ready_fraction`). This script puts them together (`validate`) and
prints the table (`format_table`).

A check, not the default: --compute_from=traces scales the compute alone
by the factor that makes the model's first backward pass end, in the
median over the rows, where the rows' traces end it (`first_step`, which
the report gives every row for reading), in up to `COMPUTE_PASSES`
passes. It stops, the ratio still off 1, where a pass does not move it:
the block start-ups are fitted to the other rows' traced heads (a block's
start to its first ready gradient), so where the heads end near the
backward pass's end (one collective after it) they absorb the factor. It
uses every row's own trace, so it is not leave-one-out: it says how much
of a directory's common offset the compute accounts for
(benchmarks/simulation/README.md), not how well the rows are predicted.
--compute_from=step_gaps does the same with the gap before a block's
second step (the first step's last collective's end to the second step's
first ready gradient, rows of K >= 2): that step has no start-up, so the
factor is the compute the traces show without one.

The table goes to stdout and to --out (default RESULTS_DIR/validation.md);
`--json` prints one object with per-row errors and `max_abs_error`.

Usage:
  python scripts/validate_sim.py benchmarks/results/2026-12-02-vgg_small-200mbit
  python scripts/validate_sim.py RESULTS_DIR --json
"""

import contextlib
import dataclasses
import json
import math
import os
import statistics
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags

# Pure Python (no TensorFlow): the pieces of the validation, and ("NAME", K)
# of a results.json row "NAME@K".
# pylint: disable=g-import-not-at-top
from tf_preempt.bench import collective_cost
from tf_preempt.bench import emulated_link
from tf_preempt.bench import overlap_fit
from tf_preempt.bench import probe_inputs
from tf_preempt.bench import results_files
from tf_preempt.bench import row_plans
from tf_preempt.bench import trace_calibration
from tf_preempt.bench import update_backlog
from tf_preempt.bench.results import split_name
# pylint: enable=g-import-not-at-top

# The accuracy the issue asks of the simulator.
TARGET_ABS_ERROR = 0.10
# The inputs measured alone are rescaled to the traces' collectives
# released alone (`_lone_ratio`) only where the two differ by more than
# this: on the machines of 2-4 December, where they agree on average, one
# trace's ratio still lies anywhere from 0.84 to 1.17, so a smaller
# difference is the traces' own spread.
LONE_TOLERANCE = 0.2
# How many times they are rescaled at most, and the ratio left that counts
# as agreement once they were.
LONE_PASSES = 8
LONE_CONVERGED = 0.01
LONE_MAX_STEP = math.log(2.0)
# The factor's bound either way: inputs measured alone that are 4 times
# off their training run are not a matter of scale (the factors found on
# real runs are 0.66-0.86); the ratio reported then stays off 1.
LONE_MAX_SCALE = 4.0
# --input_work: "startups" takes the growth of the fitted block start-ups
# with K as input work per step that a block's start does for its later
# steps (`trace_calibration.input_work_per_step`); "gaps" takes as much of
# that growth as the other rows' modelled gaps before a block's second step
# exceed their traced ones (the median, from a first pass without it:
# `_gap_excess`); "none" leaves it in their forward passes. Checks only:
# in (h23)-(h25)'s traces a K=2 block spends 2.3-2.9 ms taking its batches
# in Python, work that the compute alone (stock Keras's K=1 function, its
# batch taken in the graph) does not hold, and the growth is 0.3-1.4
# times that.
INPUT_WORK = ("startups", "gaps", "none")
INPUT_WORK_DEFAULT = "none"
# --compute_from: passes over every row at most, and how close to 1 the
# rows' median traced over modelled measure must come. The passes also
# stop where a pass moved that ratio by less than COMPUTE_CONVERGED: the
# measure does not follow the factor (why, per measure, below).
COMPUTE_PASSES = 8
COMPUTE_CONVERGED = 0.005
# --compute_from: what of `first_step` the factor brings to the traces',
# how the table names it, and why it may not follow the factor. A block's
# head is its start-up, forward pass and the backward pass up to its first
# ready gradient, so the start-ups fitted to the other rows' heads absorb
# the factor on the backward end; the gap before a block's second step has
# no start-up in it.
COMPUTE_MEASURES = {
    "traces": ("backward_end_s", "first backward end",
               "the fitted block start-ups absorb it"),
    "step_gaps": ("step_gap_s", "gap before a block's second step",
                  "a median over a few rows moves in jumps"),
}

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
                      "'auto' (of the directory's machine, "
                      "probe_inputs.cpu_cost_model), 'none', a "
                      "cpu_cost.json of scripts/bench_contention.py, or a "
                      "results directory / cost_model.json measured on a "
                      "CPU-bound link.")
  flags.DEFINE_string("comm_cpu_share", "traces", "'traces' (leave-one-out: "
                      "how long small collectives took while the backward "
                      "pass computed), 'overlaps' (a check: fitted, after "
                      "the bytes' share, to the backward pass's end and the "
                      "first collective's end of the rows that overlap "
                      "them, as --bytes_cpu_share), or a number in (0, 1].")
  flags.DEFINE_string("bytes_cpu_share", "traces", "Share of the core the "
                      "per-byte CPU work gets while compute runs: 'traces' "
                      "(leave-one-out: the backward pass's end and the "
                      "first collective's end in the rows that overlap "
                      "them, tf_preempt.bench.overlap_fit) or a number in "
                      "(0, 1] (1: the bytes take all they need).")
  flags.DEFINE_string("block_overhead_ms", "traces", "'traces' "
                      "(leave-one-out) or milliseconds.")
  flags.DEFINE_string("block_startup_ms", "traces", "'traces' "
                      "(leave-one-out, per K) or milliseconds.")
  flags.DEFINE_string("forward_share", "traces", "'traces' (leave-one-out), "
                      "'flops' (the FLOPs model's), or a number in (0, 1).")
  flags.DEFINE_string("order_penalty", "auto", "What a collective "
                      "released alone takes, by which task reaches it "
                      "last: 'auto' (the "
                      f"newest {probe_inputs.ARRIVAL_ORDER_GLOB} beside the "
                      "results directory of its heap mode and machine, "
                      "probe_inputs.order_penalty_runs), 'none', or a "
                      "runs.jsonl of scripts/bench_arrival_order.py --json.")
  flags.DEFINE_enum("layer_times", "flops", ["flops", "measured"],
                    "The DAG's per-op times without a profile.json: the "
                    "GPU FLOPs model's, or each layer's share of the step "
                    "measured by scripts/bench_step_profile.py (the newest "
                    f"{probe_inputs.STEP_PROFILE_GLOB} beside the "
                    "results); either scaled to the measured compute.")
  flags.DEFINE_bool("latency_behind_bytes", True, "A collective's round "
                    "trips wait for the bytes ahead of it on the link "
                    "(ExecutionModel.latency_behind_bytes); "
                    "--nolatency_behind_bytes: they overlap them.")
  flags.DEFINE_enum("lone_collective", "traces", ["traces", "none"],
                    "'traces': where the other rows' traces show a "
                    "collective released alone (the whole gradient in one, "
                    "after the backward pass) taking more than "
                    "LONE_TOLERANCE (20%) longer or shorter than the model "
                    "of the inputs "
                    "measured alone gives it, scale those inputs (the cost "
                    "of a collective, its CPU cost, the arrival-order "
                    "runs) to agree; 'none': take them as measured.")
  flags.DEFINE_float("lone_tolerance", LONE_TOLERANCE, "With "
                     "--lone_collective=traces: how far from 1 the ratio "
                     "may be before the inputs are rescaled (the default's "
                     "reason is at LONE_TOLERANCE).")
  flags.DEFINE_enum("reference", "median", ["median", "fastest"],
                    "Which repeat to compare with and to take compute "
                    "alone and communication alone from: the median (the "
                    "issue's metric) or the fastest (the least disturbed "
                    "on a shared machine).")
  flags.DEFINE_enum("input_work", INPUT_WORK_DEFAULT, list(INPUT_WORK),
                    "'startups': the growth of the block start-ups "
                    "fitted per K over K=1's is input work per step "
                    "(inferred: the K batches taken from the iterator at "
                    "the block's start), which the compute alone holds in "
                    "every step: "
                    "a block's later steps run without it, as early "
                    "compute (ExecutionModel.early_compute); 'gaps': as "
                    "much of it as the other rows' modelled gaps before a "
                    "block's second step exceed their traces' (a second "
                    "pass); 'none': they run the whole compute alone. "
                    "A check: the compute alone of K=1 takes its batch "
                    "in the graph, not in Python as the blocks of K>=2 "
                    "do, so it does not hold the Python part of that "
                    "work ((h23)-(h25)).")
  flags.DEFINE_enum("compute_from", "compute_alone",
                    sorted(COMPUTE_MEASURES) + ["compute_alone"],
                    "What the DAG's compute is scaled to: "
                    "'compute_alone', the measured compute alone "
                    "(compute_s); 'traces' or 'step_gaps', checks and not "
                    "the default, compute_s times the factor that brings "
                    "the model's first backward end ('traces') or its gap "
                    "before a block's second step ('step_gaps') to the "
                    "traces' (the median over the rows of first_step), "
                    "found by passes over all rows, each row's own trace "
                    "included.")


def _setting(value: str, name: str) -> Optional[float]:
  """None for "traces", else the number."""
  if value == "traces":
    return None
  try:
    return float(value)
  except ValueError:
    raise ValueError(f"--{name}={value!r}: 'traces' or a number") from None


def _lone_scaled(scale: float, cost, cpu, penalty):
  """The inputs measured alone, their seconds times `scale`: the cost of a
  collective, its CPU cost (None stays None) and the arrival-order points
  (excess, bytes, task 0 late, task 1 late)."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  # pylint: enable=g-import-not-at-top
  if scale == 1.0:
    return cost, cpu, penalty
  times = lambda c: None if c is None else plan_lib.CostModel(
      alpha=c.alpha * scale, beta=c.beta * scale)
  return times(cost), times(cpu), tuple(
      (x, nbytes, t0 * scale, t1 * scale) for x, nbytes, t0, t1 in penalty)


def _late_share(late, alike: Set[str], others: Set[str], unroll: int
                ) -> Optional[float]:
  """The share of blocks task 0 started late in the traces `alike` (of
  `late`, `probe_inputs.late_counts`), else in `others`; None without
  either."""
  share = probe_inputs.late_start_share(late, alike, unroll)
  return (probe_inputs.late_start_share(late, others, unroll)
          if share is None else share)


def _penalty(points, weight: Optional[float], cost, cpu, link_burst: float
             ) -> Tuple[Tuple[float, float], ...]:
  """`probe_inputs.order_penalty` of the arrival-order `points` at `weight`
  for a row of this cost and CPU cost; () without a weight or a penalty."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  if weight is None:
    return ()
  penalty = probe_inputs.order_penalty(
      points, weight, cost,
      execution.ExecutionModel(cpu=cpu, link_burst=link_burst))
  return penalty if any(seconds for _, seconds in penalty) else ()


def _lone_ratio(in_situ: Dict[str, float],
                penalties: Dict[str, Tuple[Tuple[float, float], ...]],
                traced: "_TracedRows", dag, cost, model
                ) -> Tuple[Optional[float], Dict[str, float]]:
  """In-situ over modelled seconds of a collective released alone.

  For each trace named in `penalties` (of a row that reduces the whole
  dense gradient in one collective after the backward pass): its first
  collective's time from the last arrival in the trace (`in_situ`) over
  the time `model` (of the row being predicted) gives it as that row ran,
  with that row's arrival-order penalty (`traced`: the directory's
  `_TracedRows`).

  Returns:
    (the median ratio, None without traces or without a positive
    modelled time; {trace name: its ratio}).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  ratios = {}
  for t, penalty in sorted(penalties.items()):
    run = execution.execute(dag, cost, *traced.as_ran(
        t, model, order_penalty=penalty,
        order_penalty_weight=1.0 if penalty else 0.0))
    seconds = run.collective_end[0][0] - run.collective_launch[0][0]
    if seconds > 0:
      ratios[t] = in_situ[t] / seconds
  return (statistics.median(ratios.values()) if ratios else None), ratios


def _next_lone_scale(tried: Sequence[Tuple[float, float]]) -> float:
  """The next scale of the inputs measured alone, from the (scale, ratio)
  pairs of `_lone_ratio` tried so far: a secant step on the logarithms
  towards a ratio of 1 (the modelled time grows faster than the scale:
  the arrival-order penalty is interpolated in the bytes' excess over the
  bucket, which scales too, so a plain `scale * ratio` overshoots and
  oscillates); `scale * ratio` from the first, at most `LONE_MAX_STEP`
  (in the logarithm) a step and within `LONE_MAX_SCALE` of 1."""
  x1, h1 = (math.log(v) for v in tried[-1])
  step = h1
  if len(tried) > 1:
    x0, h0 = (math.log(v) for v in tried[-2])
    if h1 != h0:
      step = -h1 * (x1 - x0) / (h1 - h0)
  # At most a factor of 2 a step: two nearly equal ratios would send a
  # secant far.
  scale = math.exp(x1 + max(-LONE_MAX_STEP, min(LONE_MAX_STEP, step)))
  return max(1 / LONE_MAX_SCALE, min(LONE_MAX_SCALE, scale))


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


@dataclasses.dataclass(frozen=True)
class _TracedRows:
  """The directory's traced rows, each by its trace's name.

  Attributes:
    row_of: the results.json row ("NAME@K") of each trace.
    ran: (the plan, the bench.py args, `ExecutionModel.workers`) the row
      ran; its plan depends on the tensor sizes only, not on the per-op
      times.
    first_ready: where in the backward pass the row's first collective
      becomes ready (`row_plans.first_ready_fraction`), for the fit of the
      forward share and the block start-up to the traces' block heads.
    completes: how many tensors each of the row's collectives completes
      (their updates, the fused buffer's unpacking and the optimizer,
      follow that collective).
    disturbed: the traces whose run was more than the target slower than
      the row's fastest repeat: something else slowed it (the machine is
      shared), and its measurements would carry that into the other rows'
      predictions. A trace is of the row's last run, or, where details.json
      has `trace_runs`, of its median run (scripts/bench.py from 7
      December, after (h14)); then a trace is disturbed when its blocks are
      more than the target slower than the row's median, the run it is
      of.
  """
  row_of: Dict[str, str]
  ran: Dict[str, Tuple[Any, Sequence[str], Optional[int]]]
  first_ready: Dict[str, Optional[float]]
  completes: Dict[str, Any]
  disturbed: Set[str]

  def as_ran(self, trace: str, model, **changes):
    """(the plan, `model` as the trace's row ran it: its K, credit and
    workers, `row_plans.as_ran`; `changes` replace more fields)."""
    plan, args, workers = self.ran[trace]
    return plan, row_plans.as_ran(model, results_files.trace_unroll(trace),
                                  args, workers, **changes)


def _traced_rows(results: Dict[str, Any], settings: Dict[str, Any],
                 plans_dir: str, base_dag, cost, workers: int,
                 blocks_of: Dict[str, Any],
                 traces_of_median_runs: bool = False) -> _TracedRows:
  """The `_TracedRows` of the planner schedulers' rows of `results`
  (`traces_of_median_runs`: details.json has `trace_runs`)."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  # pylint: enable=g-import-not-at-top
  row_of = {results_files.trace_name(name): name
            for name in results["schedulers"]
            if split_name(name)[0] in plan_lib.SCHEDULERS}
  ran, first_ready, completes, disturbed = {}, {}, {}, set()
  for trace, row in row_of.items():
    args = (settings.get(row) or {}).get("args") or ()
    plan, _ = row_plans.row_plan(plans_dir, row, split_name(row)[0], args,
                                 base_dag, cost, workers)
    ran_workers = row_plans.gathering_workers(args, workers)
    ran[trace] = (plan, args, ran_workers)
    first_ready[trace] = row_plans.first_ready_fraction(base_dag, plan,
                                                        ran_workers)
    completes[trace] = row_plans.completed_tensors(base_dag, plan,
                                                   ran_workers)
    blocks = blocks_of.get(trace)
    measured = results["schedulers"][row]
    usual = (measured["median_s"] if traces_of_median_runs else
             min(measured.get("step_s") or [measured["median_s"]]))
    if blocks and (statistics.median(b["block_s"] for b in blocks) /
                   split_name(row)[1] > (1 + TARGET_ABS_ERROR) * usual):
      disturbed.add(trace)
  return _TracedRows(row_of, ran, first_ready, completes, disturbed)


def _row_costs(cost, cpu, calib: Dict[str, Any],
               share_given: Optional[float]):
  """A row's cost of a collective, its CPU cost and the core share of a
  collective's fixed CPU work while compute runs.

  Args:
    cost: the cost of a collective alone (`CostModel`).
    cpu: its CPU cost (`CostModel`), or None.
    calib: `trace_calibration.calibrate` of the other rows' traces.
    share_given: --comm_cpu_share, or None to take it from `calib`.

  Returns:
    (cost, CPU cost or None, share or None).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  # pylint: enable=g-import-not-at-top
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
  return row_cost, row_cpu, share


def _fitted_bytes_share(dag, cost, model, calib: Dict[str, Any],
                        traced: _TracedRows, startups: Dict[int, float]):
  """How the core was shared while a collective overlapped the backward
  pass, in the other rows that release one before it ends.

  Args:
    dag: the row's training DAG.
    cost: the row's cost of a collective.
    model: the row's `ExecutionModel`; each other row is modelled as it
      ran (`row_plans.as_ran`, with the start-up of its K).
    calib: `trace_calibration.calibrate` of the other rows' traces.
    traced: the directory's `_TracedRows`.
    startups: the block start-up per K.

  Returns:
    (`overlap_fit.fit_bytes_share` of the samples, the samples).
  """
  samples = []
  for t, overlaps in sorted(calib["overlaps"].items()):
    if not overlaps or t not in traced.row_of or (
        traced.first_ready.get(t) or 1.0) >= 1.0:
      continue
    samples.append(overlap_fit.OverlapSample(
        *traced.as_ran(t, model, block_startup=startups.get(
            results_files.trace_unroll(t), 0.0)),
        statistics.median(o[0] for o in overlaps),
        statistics.median(o[1] for o in overlaps)))
  return overlap_fit.fit_bytes_share(dag, cost, samples), samples


def _fitted_overhead(dag, cost, model, calib: Dict[str, Any],
                     traced: _TracedRows, lags: Dict[str, Any],
                     sparse: bool, workers: int, unroll: int):
  """The per-block overhead after the barrier, fitted to the other rows'
  block tails; see the module doc.

  The traces end at the last planned collective; the sparse all-gathers
  after it are the model's, not part of the overhead: each other row's
  measured tails less what this model puts after that row's last planned
  collective (how long depends on the row: the bucket is empty after one
  large collective, full after a chain of small ones).

  Args:
    dag: the row's training DAG.
    cost: the row's cost of a collective.
    model: the row's `ExecutionModel`.
    calib: `trace_calibration.calibrate` of the other rows' traces (with
      tails).
    traced: the directory's `_TracedRows`.
    lags: `probe_inputs.start_lags` of the traces.
    sparse: whether the DAG has sparse gradients (else no tail is
      modelled).
    workers: the benchmark's worker count.
    unroll: the row's K.

  Returns:
    (the fixed overhead for K `unroll`, the seconds per queued tensor
    update or None, the median modelled tail).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  residuals, model_tails = [], []
  for other_trace, tails in sorted(calib["tails"].items()):
    other = traced.row_of.get(other_trace)
    tail = 0.0
    if sparse and other is None:
      tail = execution.exchange_tail(dag, cost, dataclasses.replace(
          model, workers=workers))
    elif sparse:
      tail = row_plans.model_tail(dag, cost,
                                  *traced.as_ran(other_trace, model))
    model_tails.append(tail)
    k = results_files.trace_unroll(other_trace)
    for t, ends, batch in zip(tails, calib["last_steps"][other_trace],
                              calib["batches"][other_trace]):
      if lags:
        # Worker 0's tail is longer than worker 1's by the next block's
        # lag (the collectives end together): that lag depends on the
        # kind of row, not on its last collective's tensors, and is added
        # back per row (`expected_lag`).
        next_lag = lags.get(other_trace, {}).get(batch + k)
        if next_lag is None:
          continue
        t -= next_lag
      residuals.append(
          (k, lambda a, e=update_backlog.traced_ends(
              ends, traced.completes.get(other_trace, [])):
           update_backlog.backlog_s(e, a), t - tail))
  per_tensor, fixed = trace_calibration.lad_fit_terms(
      residuals, trace_calibration.UPDATE_SLOPES_S)
  return (fixed.get(unroll, statistics.median(fixed.values())), per_tensor,
          statistics.median(model_tails))


class _RowSettings(NamedTuple):
  """The settings of `validate` that each row reads, parsed.

  Attributes:
    comm_cpu_share: --comm_cpu_share, or None to fit it to the traces.
    comm_share_from_overlaps: --comm_cpu_share=overlaps.
    bytes_cpu_share: --bytes_cpu_share, or None to fit it to the traces.
    block_overhead_ms: --block_overhead_ms, or None to fit it.
    block_startup_ms: --block_startup_ms, or None to fit it.
    forward_share: a number given as --forward_share, else None.
    forward_from_flops: --forward_share=flops.
    reference: "median" or "fastest".
    latency_behind_bytes: see `ExecutionModel.latency_behind_bytes`.
    lone_tolerance: see `validate`.
    input_work: see `validate`.
    input_work_cap: with input_work "gaps", the row's cap on the input
      work (seconds; None: none is taken).
  """
  comm_cpu_share: Optional[float]
  comm_share_from_overlaps: bool
  bytes_cpu_share: Optional[float]
  block_overhead_ms: Optional[float]
  block_startup_ms: Optional[float]
  forward_share: Optional[float]
  forward_from_flops: bool
  reference: str
  latency_behind_bytes: bool
  lone_tolerance: float
  input_work: str
  input_work_cap: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class _DirectoryInputs:
  """What every row's prediction takes from the results directory.

  Attributes:
    results_dir: the directory.
    results: its results.json, with the fastest compute_s and comm_s under
      --reference=fastest.
    setup: `results_files.benchmark_setup`.
    bench_args: details.json's settings of each row (its bench.py args).
    plans_dir: where the rows' recorded plans are.
    base_dag: the training DAG, its per-op times scaled to the measured
      compute (without a profile.json).
    has_profile: whether profile.json gave the per-op times.
    compute_source: where the per-op times came from.
    compute_scale: the factor they were scaled by (1 with a profile).
    sparse: whether the DAG has sparse gradients.
    total_bytes: the bytes of all the DAG's gradients.
    cost: the cost of a collective alone (`CostModel`).
    cost_source: where it came from.
    cpu: its CPU cost (`CostModel`), or None.
    cpu_source: where that came from.
    link_burst: the link's token bucket in seconds of traffic (0: none).
    penalty: the arrival-order points (`probe_inputs.arrival_points`).
    penalty_source: where they came from, or why there are none.
    warmup: bench.py's warm-up steps.
    lags: `probe_inputs.start_lags` of the traces.
    late: `probe_inputs.late_counts` of `lags` ({} without `penalty`).
    blocks_of: each trace's blocks (`trace_calibration.trace_blocks`).
    median_traces: whether the traces are of each row's median run.
    traced: the directory's `_TracedRows`.
    lone_in_situ: what the first collective took in the traces of the
      rows that release the whole dense gradient alone (`_lone_in_situ`).
    compute_total: the DAG's forward plus backward seconds.
    flops_share: the DAG's forward share of them.
    early_share: the share of the compute that a block's later steps run
      at its start (`probe_inputs.early_share`).
    early_source: where it came from.
    early: that share of `compute_total`, in seconds.
    missing: what the benchmark should have recorded, so far.
  """
  results_dir: str
  results: Dict[str, Any]
  setup: Dict[str, Any]
  bench_args: Dict[str, Any]
  plans_dir: str
  base_dag: Any
  has_profile: bool
  compute_source: str
  compute_scale: float
  sparse: bool
  total_bytes: int
  cost: Any
  cost_source: str
  cpu: Any
  cpu_source: str
  link_burst: float
  penalty: Sequence[Tuple[float, ...]]
  penalty_source: str
  warmup: int
  lags: Dict[str, Any]
  late: Dict[str, Any]
  blocks_of: Dict[str, Any]
  median_traces: bool
  traced: _TracedRows
  lone_in_situ: Dict[str, float]
  compute_total: float
  flops_share: float
  early_share: float
  early_source: str
  early: float
  missing: Tuple[str, ...]


class _RowFit(NamedTuple):
  """A row's figures from the other rows' traces (`_row_fit`).

  Attributes:
    calib: `trace_calibration.calibrate` of the other rows' traces.
    heads: (K, first-ready fraction, median block head) of each of them.
    forward_share: the forward share, fitted or fixed.
    startups: the block start-up per K, fitted.
    startup: the row's block start-up, fitted or given.
    dag: the row's training DAG, of that forward share.
    input_work: seconds of input work per step that the start-ups do for
      a block's later steps (`trace_calibration.input_work_per_step`), or
      None (--input_work=none, or not identifiable).
    early: seconds of each later step's compute run at the block's start:
      the early compute measured, plus `input_work`.
  """
  calib: Dict[str, Any]
  heads: List[Tuple[int, float, float]]
  forward_share: float
  startups: Dict[int, float]
  startup: float
  dag: Any
  input_work: Optional[float]
  early: float


class _Lateness(NamedTuple):
  """How late task 0 starts the blocks of rows like one row (`_lateness`).

  Attributes:
    lag: the expected start lag of task 0 (seconds), or None.
    weight: the share of blocks task 0 started late, or None.
    lone_rows: {trace of `_DirectoryInputs.lone_in_situ` of another row:
      its own share of late blocks, or None}.
  """
  lag: Optional[float]
  weight: Optional[float]
  lone_rows: Dict[str, Optional[float]]


class _ScaledModel(NamedTuple):
  """A row's model with the inputs measured alone at one scale.

  Attributes:
    model: the `ExecutionModel`, without the block start-up and overhead.
    cost: the row's cost of a collective.
    cpu: its CPU cost, or None.
    comm_cpu_share: the core's share of a collective's fixed CPU work
      while compute runs, or None.
    points: the arrival-order points at this scale.
    penalty: the row's arrival-order penalty (`_penalty`).
    overlap_samples: the samples the bytes' share was fitted to.
  """
  model: Any
  cost: Any
  cpu: Any
  comm_cpu_share: Optional[float]
  points: Sequence[Tuple[float, ...]]
  penalty: Tuple[Tuple[float, float], ...]
  overlap_samples: List[Any]


class _LoneFit(NamedTuple):
  """The row's model at the scale `_lone_fit` settled on.

  Attributes:
    scaled: the model and what it was built from.
    scale: the scale of the inputs measured alone.
    ratio: the in-situ over modelled ratio at it (`_lone_ratio`), or None.
    ratios: {trace: its ratio} at the first scale that gave any.
  """
  scaled: _ScaledModel
  scale: float
  ratio: Optional[float]
  ratios: Dict[str, float]


class _Overhead(NamedTuple):
  """The row's block overhead (`_block_overhead`).

  Attributes:
    model: the row's final `ExecutionModel`.
    overhead: the overhead before it is floored at 0, or None.
    per_tensor: the seconds per queued tensor update, or None.
    sparse_tail: the median tail modelled after the last collective, or None.
  """
  model: Any
  overhead: Optional[float]
  per_tensor: Optional[float]
  sparse_tail: Optional[float]


def _read_results(results_dir: str) -> Dict[str, Any]:
  """RESULTS_DIR/results.json of a scripts/bench.py run.

  Raises:
    ValueError: if it is missing or has no scheduler rows.
  """
  results = results_files.read_json(os.path.join(results_dir, "results.json"))
  if results is None:
    raise ValueError(f"{results_dir} has no results.json")
  if "schedulers" not in results:
    raise ValueError(f"{results_dir}/results.json has no scheduler rows: "
                     "not a scripts/bench.py results directory")
  return results


def _row_settings(comm_cpu_share: str, bytes_cpu_share: str,
                  block_overhead_ms: str, block_startup_ms: str,
                  forward_share: str, reference: str,
                  latency_behind_bytes: bool,
                  lone_tolerance: float, input_work: str) -> _RowSettings:
  """`validate`'s per-row settings, their numbers parsed.

  Raises:
    ValueError: on a number that does not parse or is out of range, an
      unknown input_work, or an input_work other than "none" with a given
      start-up.
  """
  from_overlaps = comm_cpu_share == "overlaps"
  share_given = (None if from_overlaps else
                 _setting(comm_cpu_share, "comm_cpu_share"))
  bytes_given = _setting(str(bytes_cpu_share), "bytes_cpu_share")
  if input_work not in INPUT_WORK:
    raise ValueError(f"input_work={input_work!r}: one of {INPUT_WORK}")
  if input_work != "none" and block_startup_ms != "traces":
    # A given start-up is not refitted: the later steps' input work would
    # be dropped, not moved to the block's start.
    raise ValueError(f"input_work={input_work!r} moves work into the "
                     "fitted block start-ups: it needs "
                     "block_startup_ms='traces'")
  if bytes_given is not None and not 0 < bytes_given <= 1:
    raise ValueError(f"--bytes_cpu_share={bytes_cpu_share!r}: 'traces' or a "
                     "number in (0, 1]")
  return _RowSettings(
      comm_cpu_share=share_given, comm_share_from_overlaps=from_overlaps,
      bytes_cpu_share=bytes_given,
      block_overhead_ms=_setting(block_overhead_ms, "block_overhead_ms"),
      block_startup_ms=_setting(block_startup_ms, "block_startup_ms"),
      forward_share=(None if forward_share in ("traces", "flops") else
                     _setting(forward_share, "forward_share")),
      forward_from_flops=forward_share == "flops", reference=reference,
      latency_behind_bytes=latency_behind_bytes,
      lone_tolerance=lone_tolerance, input_work=input_work)


def _check_choices(lone_collective: str, lone_tolerance: float,
                   reference: str, compute_from: str) -> None:
  """Checks `validate`'s lone_collective, lone_tolerance, reference and
  compute_from.

  Raises:
    ValueError: on a bad one.
  """
  if lone_collective not in ("traces", "none"):
    raise ValueError(f"lone_collective={lone_collective!r}: 'traces' or "
                     "'none'")
  if not lone_tolerance > 0:
    raise ValueError(f"lone_tolerance={lone_tolerance!r}: a positive "
                     "fraction")
  if reference not in ("median", "fastest"):
    raise ValueError(f"reference={reference!r}: 'median' or 'fastest'")
  if compute_from != "compute_alone" and compute_from not in COMPUTE_MEASURES:
    raise ValueError(f"compute_from={compute_from!r}: 'compute_alone', "
                     "'traces' or 'step_gaps'")


def _training_dag(results_dir: str, results: Dict[str, Any],
                  setup: Dict[str, Any], gpu: str, layer_times: str,
                  compute_factor: float = 1.0):
  """The DAG of one training step, with the directory's per-op times.

  Args:
    results_dir: the results directory.
    results: its results.json.
    setup: `results_files.benchmark_setup`.
    gpu: GPU of the FLOPs model.
    layer_times: "flops" or "measured"; see `validate`.
    compute_factor: the per-op times' factor beyond the measured ones
      (--compute_from).

  Returns:
    (the DAG, whether profile.json gave its times, where they came from,
    the factor they were scaled by, [what the benchmark should record]).

  Raises:
    ValueError: on a bad `layer_times`.
  """
  per_worker = setup["global_batch_size"] // setup["workers"]
  profile_path = os.path.join(results_dir, "profile.json")
  has_profile = os.path.isfile(profile_path)
  # scripts/simulate.py (its cached model DAG builder), imported only here
  # because it loads TensorFlow; a script's folder is on sys.path.
  import simulate  # pylint: disable=g-import-not-at-top
  base_dag = simulate.model_dag(setup["model"], per_worker, gpu,
                                profile_path if has_profile else None)
  # Checked after the DAG is built: its errors come first.
  if layer_times not in ("flops", "measured"):
    raise ValueError(f"layer_times={layer_times!r}: 'flops' or 'measured'")
  if has_profile:
    return (row_plans.scaled(base_dag, compute_factor), True,
            "profile.json" + _factor_note(compute_factor), compute_factor, [])
  shares, shares_source = (None, "") if layer_times == "flops" else (
      probe_inputs.layer_shares(results_dir, setup["model"]))
  if shares is not None:
    # The layers' measured shares of the step (on a CPU like the
    # benchmark's), in place of the GPU FLOPs model's, in its units.
    base_dag = row_plans.with_shares(base_dag, shares)
  scale = compute_factor * results["compute_s"] / (
      base_dag.backward_end() + base_dag.forward_length())
  base_dag = row_plans.scaled(base_dag, scale)
  compute_source = (
      f"{gpu} FLOPs model" if shares is None else
      f"each layer's measured share of the step ({shares_source})") + (
          f" scaled to the measured compute_s "
          f"{results['compute_s'] * 1e3:.1f} ms") + _factor_note(
              compute_factor)
  missing = ["profile.json: measured seconds of every forward and backward "
             "op of one step, {op name: seconds} with the op names of "
             "tf_preempt.profile.model_to_dag (e.g. from "
             "scripts/bench_profile.py), per worker count" + (
                 "; the step profile's shares stand in" if shares
                 is not None else "")]
  return base_dag, False, compute_source, scale, missing


def _factor_note(compute_factor: float) -> str:
  return ("" if compute_factor == 1.0 else
          f", times {compute_factor:.3f} (--compute_from)")


def _collective_costs(results_dir: str, results: Dict[str, Any], traces,
                      setup: Dict[str, Any], total_bytes: int,
                      cost_fallback: str, cpu_cost: str):
  """The cost of a collective alone and its CPU cost; see the module doc.

  Returns:
    (the cost, its source, the CPU cost or None, its source, [what the
    benchmark should record]).
  """
  cost, cost_source = collective_cost.cost_model(
      results_dir, results, traces, total_bytes, cost_fallback)
  missing = []
  if not cost_source.startswith("cost_model.json"):
    missing.append("cost_model.json: {alpha, beta} fitted "
                   "(CostModel.fit) from all-reduces of >= 4 sizes timed "
                   "alone on the benchmark's link and worker count")
  cpu, cpu_source = probe_inputs.cpu_cost_model(results_dir, setup, cost,
                                                total_bytes, cpu_cost)
  # The link's token bucket (tc tbf's burst over its rate): the cost of a
  # collective alone is refitted with it. Where the collective's own cost
  # is taken as CPU work (a CPU-bound link) its bytes need the whole core
  # at the rate and the bucket cannot speed them: nothing to refit.
  link_burst = setup["link_burst_s"]
  if link_burst and cpu is not cost:
    cost, cost_source = collective_cost.cost_model(
        results_dir, results, traces, total_bytes, cost_fallback, link_burst,
        cpu)
  return cost, cost_source, cpu, cpu_source, missing


def _arrival_penalty(results_dir: str, order_penalty: str,
                     setup: Dict[str, Any]):
  """What a collective released alone took with task 0 or task 1 reaching
  it last: measured with two workers on the directory's emulated link, by
  seconds of traffic beyond its bucket.

  Returns:
    (`probe_inputs.arrival_points`, () where they do not apply; their
    source, or why there are none).
  """
  penalty_runs, penalty_source = probe_inputs.order_penalty_runs(
      results_dir, order_penalty, setup["heap"], setup["machine"],
      setup["speed_ms_per_matmul"])
  penalty = probe_inputs.arrival_points(penalty_runs, setup["link_rate"])
  if penalty and (setup["workers"] != 2 or not setup["link_burst_s"]):
    penalty, penalty_source = (), (
        f"none: measured with 2 workers on an emulated link ("
        f"{penalty_source}), not {setup['workers']} on "
        f"{setup['link_rate'] or 'loopback'}")
  elif penalty_runs and not penalty:
    penalty_source = (f"none: no run of {penalty_source} at "
                      f"{setup['link_rate']} exceeds its bucket")
  return penalty, penalty_source


def _lone_in_situ(results_dir: str, traces, warmup: int,
                  traced: _TracedRows, base_dag) -> Dict[str, float]:
  """What the first collective took from the last worker's arrival, past
  the warm-up, in the rows that reduce the whole dense gradient in one
  collective after the backward pass (as stock TensorFlow's one pack)."""
  return {
      t: v for t, v in probe_inputs.first_collective_in_situ(
          results_dir, traces, warmup).items()
      if t in traced.ran and (traced.first_ready.get(t) or 0.0) >= 1.0 and
      row_plans.dense_collectives(base_dag, traced.ran[t][0]) == 1}


def _directory_inputs(results_dir: str, results: Dict[str, Any],
                      details: Dict[str, Any], gpu: str, cost_fallback: str,
                      cpu_cost: str, order_penalty: str, layer_times: str,
                      lone_collective: str, reference: str,
                      compute_factor: float = 1.0) -> _DirectoryInputs:
  """Loads and derives what every row's prediction takes from the
  directory; the arguments are `validate`'s, and `_training_dag`'s
  compute_factor.

  Raises:
    ValueError: on a bad `layer_times`.
  """
  if reference == "fastest":
    results = dict(results, **_fastest_references(results, details))
  traces = results_files.worker0_traces(results_dir)
  setup = results_files.benchmark_setup(results, traces, details)
  base_dag, has_profile, compute_source, compute_scale, missing = (
      _training_dag(results_dir, results, setup, gpu, layer_times,
                    compute_factor))
  total_bytes = sum(t.nbytes for t in base_dag.tensors)
  cost, cost_source, cpu, cpu_source, cost_missing = _collective_costs(
      results_dir, results, traces, setup, total_bytes, cost_fallback,
      cpu_cost)
  missing += cost_missing
  penalty, penalty_source = _arrival_penalty(results_dir, order_penalty,
                                             setup)
  # How much later than task 1 task 0 started each block (its tail is
  # longer by the next block's lag), and its late blocks after the
  # warm-up (bench.py's default warm-up), per two-worker trace.
  warmup = int(results_files.command_flag(results, "warmup_steps", "8"))
  lags = probe_inputs.start_lags(results_dir, traces)
  late = probe_inputs.late_counts(lags, warmup) if penalty else {}
  bench_args = details.get("settings") or {}
  plans_dir = os.path.join(results_dir, "plans")
  blocks_of = {name: trace_calibration.trace_blocks(trace)
               for name, trace in traces.items()}
  # bench.py kept each row's median run's traces (else its last run's).
  median_traces = "trace_runs" in details
  traced = _traced_rows(results, bench_args, plans_dir, base_dag, cost,
                        setup["workers"], blocks_of,
                        traces_of_median_runs=median_traces)
  lone_in_situ = (_lone_in_situ(results_dir, traces, warmup, traced,
                                base_dag)
                  if lone_collective == "traces" else {})
  compute_total = base_dag.forward_length() + base_dag.backward_end()
  # Each later step's work that reads no updated weight, run at its
  # block's start
  # (a part of the heads, which the start-ups would hold otherwise).
  early_share, early_source = probe_inputs.early_share(
      results_dir, setup["model"], setup["machine"],
      setup["global_batch_size"] // setup["workers"], setup.get("heap"),
      setup.get("link_rate"), setup["workers"])
  if early_source.startswith("none"):
    missing.append(f"{probe_inputs.STEP_PROFILE_GLOB} beside the results: "
                   "the share of a step's compute that reads no weight "
                   "(scripts/bench_step_profile.py), for this model; or "
                   f"{probe_inputs.STEP_PHASES_GLOB} or "
                   f"{probe_inputs.BLOCK_HEAD_GLOB} of its machine "
                   "(scripts/bench_step_phases.py, "
                   "scripts/bench_block_head.py)")
  return _DirectoryInputs(
      results_dir=results_dir, results=results, setup=setup,
      bench_args=bench_args, plans_dir=plans_dir, base_dag=base_dag,
      has_profile=has_profile, compute_source=compute_source,
      compute_scale=compute_scale,
      # Without sparse gradients the model puts nothing after a block's
      # last collective.
      sparse=any(t.sparse is not None for t in base_dag.tensors),
      total_bytes=total_bytes, cost=cost, cost_source=cost_source, cpu=cpu,
      cpu_source=cpu_source, link_burst=setup["link_burst_s"],
      penalty=penalty, penalty_source=penalty_source, warmup=warmup,
      lags=lags, late=late, blocks_of=blocks_of,
      median_traces=median_traces, traced=traced,
      lone_in_situ=lone_in_situ, compute_total=compute_total,
      flops_share=base_dag.forward_length() / compute_total,
      early_share=early_share, early_source=early_source,
      early=early_share * compute_total, missing=tuple(missing))


def _row_fit(trace: str, unroll: int, inputs: _DirectoryInputs,
             settings: _RowSettings) -> _RowFit:
  """The figures of the row of `trace` from the other rows' traces: the
  forward share and block start-ups fitted to their block heads."""
  traced = inputs.traced
  calib = trace_calibration.calibrate(
      inputs.blocks_of, exclude={trace}, disturbed=traced.disturbed)
  heads = [(results_files.trace_unroll(t), traced.first_ready[t],
            statistics.median(h)) for t, h in sorted(calib["heads"].items())
           if h and traced.first_ready.get(t) is not None]
  # With a profile (or --forward_share=flops) the per-op times are kept
  # and only the start-ups are fitted.
  fixed_share = (inputs.flops_share
                 if inputs.has_profile or settings.forward_from_flops
                 else settings.forward_share)
  share_f, startups = trace_calibration.fit_block_head(
      heads, inputs.compute_total, fixed_share,
      default_share=inputs.flops_share, early_s=inputs.early)
  input_work, early = None, inputs.early
  if settings.input_work != "none":
    input_work = trace_calibration.input_work_per_step(startups)
  if settings.input_work == "gaps":
    input_work = (None if None in (input_work, settings.input_work_cap)
                  else min(input_work, settings.input_work_cap))
  if input_work:
    # The later steps' input work moves from the forward passes to the
    # block's start, where the early compute already runs: the start-ups
    # refitted with it keep the heads (but where a K's growth is below the
    # median, its start-up may floor at 0, and the early compute is capped
    # at the forward pass below), and a block's later steps lose it.
    early += input_work
    share_f, startups = trace_calibration.fit_block_head(
        heads, inputs.compute_total, fixed_share,
        default_share=inputs.flops_share, early_s=early)
  dag = inputs.base_dag
  if fixed_share is None:
    dag = row_plans.with_forward_share(inputs.base_dag, share_f)
  startup = (startups.get(unroll, 0.0) if settings.block_startup_ms is None
             else settings.block_startup_ms * 1e-3)
  return _RowFit(calib, heads, share_f, startups, startup, dag, input_work,
                 early)


def _lateness(trace: str, unroll: int, dag, plan,
              inputs: _DirectoryInputs) -> _Lateness:
  """Task 0's late starts in the other rows' traces, for the row of
  `trace`, from the rows of its kind where they have any."""
  traced = inputs.traced
  # Task 0's late starts depend on how the plan ends a block: chains of
  # one collective per tensor keep the workers together.
  others = set(traced.row_of) - {trace} - traced.disturbed
  kind = row_plans.per_tensor_collectives(dag, plan)
  alike = {t for t in others if row_plans.per_tensor_collectives(
      dag, traced.ran[t][0]) == kind}
  lag = probe_inputs.expected_lag(inputs.lags, alike, unroll, inputs.warmup)
  if lag is None:
    lag = probe_inputs.expected_lag(inputs.lags, others, unroll,
                                    inputs.warmup)
  weight = (_late_share(inputs.late, alike, others, unroll)
            if inputs.penalty else None)
  # The other rows of `lone_in_situ`, with their own mix of task 0
  # arriving late (as rows that fuse tensors).
  fused = {t for t in others
           if not row_plans.per_tensor_collectives(dag, traced.ran[t][0])}
  lone_rows = {
      t: (_late_share(inputs.late, fused, others,
                      results_files.trace_unroll(t))
          if inputs.penalty else None)
      for t in sorted(set(inputs.lone_in_situ) & others)}
  return _Lateness(lag, weight, lone_rows)


def _scaled_model(scale: float, base_model, fit: _RowFit,
                  weight: Optional[float], inputs: _DirectoryInputs,
                  settings: _RowSettings) -> _ScaledModel:
  """The row's model with the inputs measured alone times `scale`.

  Args:
    scale: the factor of the inputs measured alone (`_lone_scaled`).
    base_model: everything of the model but those inputs and what follows
      from them.
    fit: the row's `_RowFit`.
    weight: the row's share of blocks task 0 started late, or None.
    inputs: the directory's inputs.
    settings: the parsed settings.

  Returns:
    The `_ScaledModel`.
  """
  cost_in, cpu_in, points = _lone_scaled(scale, inputs.cost, inputs.cpu,
                                         inputs.penalty)
  row_cost, row_cpu, share = _row_costs(cost_in, cpu_in, fit.calib,
                                        settings.comm_cpu_share)
  row_penalty = _penalty(points, weight, row_cost, row_cpu, inputs.link_burst)
  model = dataclasses.replace(
      base_model, order_penalty=row_penalty,
      order_penalty_weight=1.0 if row_penalty else 0.0, cpu=row_cpu,
      comm_cpu_share=share if share is not None else 1.0)
  bytes_share, samples = settings.bytes_cpu_share, []
  if bytes_share is None:
    bytes_share, samples = _fitted_bytes_share(
        fit.dag, row_cost, model, fit.calib, inputs.traced, fit.startups)
  # Without a row that overlaps them, the bytes take all they need.
  model = dataclasses.replace(
      model, bytes_cpu_share=1.0 if bytes_share is None else bytes_share)
  if settings.comm_share_from_overlaps and samples and model.cpu is not None:
    # The same evidence for the fixed work's share, the bytes' share now
    # as fitted (a check, not the default).
    share = overlap_fit.fit_share(
        fit.dag, row_cost,
        [dataclasses.replace(s, model=dataclasses.replace(
            s.model, bytes_cpu_share=model.bytes_cpu_share))
         for s in samples], "comm_cpu_share")
    model = dataclasses.replace(model, comm_cpu_share=share)
  return _ScaledModel(model, row_cost, row_cpu, share, points, row_penalty,
                      samples)


def _lone_fit(base_model, fit: _RowFit, lateness: _Lateness,
              inputs: _DirectoryInputs, settings: _RowSettings) -> _LoneFit:
  """The row's model, the inputs measured alone scaled to the training run.

  The inputs measured alone (cost_model.json and the probes: the cost of a
  collective, its CPU cost, the arrival-order runs) are scaled to what a
  collective released alone took in the training run itself, in the other
  rows' traces (`_lone_ratio`): left as measured where the two agree
  within `lone_tolerance`; else rescaled (by secant steps,
  `_next_lone_scale`) until they agree within `LONE_CONVERGED`.

  Args:
    base_model: see `_scaled_model`.
    fit: the row's `_RowFit`.
    lateness: the row's `_Lateness`.
    inputs: the directory's inputs.
    settings: the parsed settings.

  Returns:
    The `_LoneFit`.
  """
  scale, ratio, ratios, tried = 1.0, None, {}, []
  while True:
    scaled = _scaled_model(scale, base_model, fit, lateness.weight, inputs,
                        settings)
    if not lateness.lone_rows:
      break
    # The ratio of the model just built: the one reported.
    ratio, first = _lone_ratio(
        inputs.lone_in_situ,
        {t: _penalty(scaled.points, w, scaled.cost, scaled.cpu,
                     inputs.link_burst)
         for t, w in lateness.lone_rows.items()},
        inputs.traced, fit.dag, scaled.cost, scaled.model)
    ratios = ratios or first
    if ratio is None or len(tried) == LONE_PASSES or abs(ratio - 1) <= (
        settings.lone_tolerance if not tried else LONE_CONVERGED):
      break
    tried.append((scale, ratio))
    scale = _next_lone_scale(tried)
    if scale == tried[-1][0]:
      # Held at LONE_MAX_SCALE: another pass would build this model again.
      break
  return _LoneFit(scaled, scale, ratio, ratios)


def _block_overhead(unroll: int, plan, fit: _RowFit,
                    scaled: _ScaledModel, lag: Optional[float],
                    inputs: _DirectoryInputs,
                    settings: _RowSettings) -> _Overhead:
  """The row's model with its block start-up and per-block overhead.

  Args:
    unroll: the row's K.
    plan: the row's plan.
    fit: the row's `_RowFit`.
    scaled: the row's model so far (`_lone_fit`).
    lag: the row's expected start lag of task 0, or None.
    inputs: the directory's inputs.
    settings: the parsed settings.

  Returns:
    The `_Overhead`.
  """
  given = settings.block_overhead_ms
  sparse_tail = per_tensor = None
  overhead = None if given is None else given * 1e-3
  if overhead is None and fit.calib["tails"]:
    overhead, per_tensor, sparse_tail = _fitted_overhead(
        fit.dag, scaled.cost, scaled.model, fit.calib, inputs.traced,
        inputs.lags, inputs.sparse, inputs.setup["workers"], unroll)
  model = dataclasses.replace(scaled.model, block_startup=fit.startup)
  if per_tensor:
    overhead += row_plans.queued_updates(fit.dag, scaled.cost, plan, model,
                                         per_tensor)
  if overhead is not None and given is None and lag:
    # The tails were fitted without task 0's lag: this row's expected.
    overhead += lag
  model = dataclasses.replace(model, block_overhead=max(0.0, overhead or 0.0))
  return _Overhead(model, overhead, per_tensor, sparse_tail)


def _calibration_report(fit: _RowFit, lateness: _Lateness, lone: _LoneFit,
                        overhead: _Overhead, inputs: _DirectoryInputs
                        ) -> Dict[str, Any]:
  """A row's report of the figures its model was calibrated with."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  scaled, calib = lone.scaled, fit.calib
  return {"forward_share": fit.forward_share,
          "input_work_s": fit.input_work,
          "comm_cpu_share": scaled.comm_cpu_share,
          "bytes_cpu_share": overhead.model.bytes_cpu_share,
          "overlap_traces": len(scaled.overlap_samples),
          "block_overhead_s": overhead.overhead,
          "block_startup_s": fit.startup,
          "task0_late_share": lateness.weight,
          "task0_expected_lag_s": lateness.lag,
          "order_penalty": [list(p) for p in scaled.penalty],
          "order_penalty_whole_s": (
              execution.order_penalty_seconds(
                  scaled.penalty,
                  scaled.cost.beta * inputs.total_bytes / 2 - inputs.link_burst)
              if scaled.penalty else None),
          "overhead_per_tensor_s": overhead.per_tensor,
          "lone_scale": lone.scale,
          "lone_ratio": lone.ratio,
          "lone_from_traces": lone.ratios,
          "trace_tail_s": calib["tail_s"],
          "sparse_tail_s": overhead.sparse_tail,
          "from_traces": calib["rows"],
          "small_collective_s": calib["small_s"],
          "alpha_s": scaled.cost.alpha,
          "cpu_fixed_s": None if scaled.cpu is None else scaled.cpu.alpha,
          "heads": [{"unroll": k, "first_ready_fraction": f, "head_s": h}
                    for k, f, h in fit.heads],
          "tail_s_by_trace": {
              t: statistics.median(v)
              for t, v in sorted(calib["tails"].items())}}


def _add_notes(entry: Dict[str, Any], row: Dict[str, Any],
               calib: Dict[str, Any]) -> None:
  """Adds to a predicted row's `entry` what makes its error less telling:
  small-collective figures from disturbed traces, and repeats (of its
  results.json `row`) that differ by more than the target."""
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


def _gap_excess(rows: Dict[str, Dict[str, Any]]
                ) -> Dict[str, Optional[float]]:
  """Per row, the median over the OTHER rows of K >= 2 of how much longer
  the model's gap before a block's second step is than their traces' (at
  least 0), from their reports; None where no other row has both."""
  excess = {name: modelled - traced for name, row in rows.items()
            for traced, modelled in trace_calibration.first_step_pairs(
                [row], "step_gap_s")}
  out = {}
  for name in rows:
    others = [e for n, e in excess.items() if n != name]
    out[name] = max(0.0, statistics.median(others)) if others else None
  return out


def _predicted_row(name: str, row: Dict[str, Any], inputs: _DirectoryInputs,
                   settings: _RowSettings) -> Tuple[Dict[str, Any], bool]:
  """Predicts one row of results.json from the directory's inputs.

  Args:
    name: the row's name, NAME@K.
    row: its results.json entry.
    inputs: the directory's inputs.
    settings: the parsed settings.

  Returns:
    (the row's report, whether its plan was rebuilt here rather than
    recorded).
  """
  # pylint: disable=g-import-not-at-top
  from tf_preempt import plan as plan_lib
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  scheduler, unroll = split_name(name)
  measured = float(row["median_s"] if settings.reference == "median" else
                   min(row.get("step_s") or [row["median_s"]]))
  entry = {"scheduler": scheduler, "unroll": unroll, "measured_s": measured,
           "predicted_s": None, "error": None}
  if scheduler not in plan_lib.SCHEDULERS:
    entry["note"] = "not a planner scheduler"
    return entry, False
  trace = results_files.trace_name(name)
  fit = _row_fit(trace, unroll, inputs, settings)
  dag, workers = fit.dag, inputs.setup["workers"]
  args = (inputs.bench_args.get(name) or {}).get("args") or ()
  plan, plan_source = row_plans.row_plan(inputs.plans_dir, name, scheduler,
                                         args, dag, inputs.cost, workers)
  given = row_plans.given_flags(args)
  lateness = _lateness(trace, unroll, dag, plan, inputs)
  # Everything of the model but the inputs measured alone and what
  # follows from them.
  base_model = execution.ExecutionModel(
      unroll=unroll, **row_plans.credit(given),
      workers=row_plans.gathering_workers(args, workers),
      link_burst=inputs.link_burst, fixed_cpu_fifo=True,
      latency_behind_bytes=settings.latency_behind_bytes,
      early_compute=min(fit.early, dag.forward_length()))
  lone = _lone_fit(base_model, fit, lateness, inputs, settings)
  overhead = _block_overhead(unroll, plan, fit, lone.scaled, lateness.lag,
                             inputs, settings)
  model = overhead.model
  run = execution.execute(dag, lone.scaled.cost, plan, model)
  predicted = run.step_time
  entry.update(
      predicted_s=predicted, error=(predicted - measured) / measured,
      planner_model_s=plan_lib.simulate(dag, inputs.cost, plan).iteration_time,
      plan=plan_source,
      collectives=(len(plan.collectives) if model.workers is None else
                   row_plans.dense_collectives(dag, plan)),
      model=model.describe(),
      # The model's first step beside the row's own trace (for reading
      # only: no calibration uses a row's own trace).
      first_step={
          "model": {"backward_end_s": overlap_fit.backward_end(dag, run),
                    "collectives_s": list(zip(run.collective_launch[0],
                                              run.collective_end[0])),
                    # Only where the traces can have it (K >= 2).
                    **({} if unroll < 2 else {
                        "step_gap_s": row_plans.step_gap(dag, plan, model,
                                                         run)})},
          "trace": trace_calibration.first_step_medians(
              inputs.blocks_of.get(trace))},
      calibration=_calibration_report(fit, lateness, lone, overhead, inputs))
  _add_notes(entry, row, fit.calib)
  return entry, not plan_source.startswith("recorded")


def _input_taken(inputs: _DirectoryInputs) -> Dict[str, Any]:
  """{"input_taken_s": {row: its trace's median time of taking a block's
  batches}} where the traces recorded it (bench.py from 7 December,
  evening), else {}: earlier reports stay as they were. For reading only
  (the fitted start-ups hold it), so disturbed traces count too."""
  taken = trace_calibration.input_medians(inputs.blocks_of)
  rows = {inputs.traced.row_of[t]: v for t, v in taken.items()
          if t in inputs.traced.row_of}
  return {"input_taken_s": dict(sorted(rows.items()))} if rows else {}


def _report(rows: Dict[str, Any], stand_in_plans: bool,
            inputs: _DirectoryInputs, arguments: Dict[str, Any]
            ) -> Dict[str, Any]:
  """`validate`'s report of its `rows`, its `arguments` as the settings."""
  # pylint: disable=g-import-not-at-top
  from tf_preempt.plan import execution
  # pylint: enable=g-import-not-at-top
  missing = list(inputs.missing)
  if stand_in_plans:
    missing.append("plans/NAME@K.json: the plan each row ran "
                   "(Plan.to_json), with tensor names and sizes as in "
                   "model_to_dag; without it the runtime's plans are "
                   "rebuilt here")
  errors = [abs(r["error"]) for r in rows.values() if r["error"] is not None]
  setup, cost, cpu = inputs.setup, inputs.cost, inputs.cpu
  return {
      "rows": rows,
      "max_abs_error": max(errors) if errors else None,
      "median_abs_error": statistics.median(errors) if errors else None,
      "target": TARGET_ABS_ERROR,
      "inputs": {"results_dir": inputs.results_dir, "setup": setup,
                 "sparse": [{"name": t.name, "nbytes": t.nbytes,
                             "values_nbytes": t.sparse.values_nbytes,
                             "indices_nbytes": t.sparse.indices_nbytes}
                            for t in inputs.base_dag.tensors
                            if t.sparse is not None],
                 "disturbed_traces": sorted(inputs.traced.disturbed),
                 # Only where it holds, so that the earlier reports stay as
                 # they were.
                 **({"traces_of_median_runs": True}
                    if inputs.median_traces else {}),
                 "compute": inputs.compute_source,
                 "compute_scale": inputs.compute_scale,
                 "cost_model": cost.to_dict(),
                 "cost_source": inputs.cost_source,
                 "cpu_cost": None if cpu is None else cpu.to_dict(),
                 "cpu_source": inputs.cpu_source,
                 "early_share": inputs.early_share,
                 "early_source": inputs.early_source,
                 "early_compute_s": inputs.early,
                 **_input_taken(inputs),
                 "order_penalty": [list(p) for p in inputs.penalty],
                 "order_penalty_source": inputs.penalty_source,
                 "speed_ms_per_matmul": {
                     "directory": setup["speed_ms_per_matmul"],
                     # The directory's own cost (a CPU-bound link) was
                     # measured at the directory's speed.
                     "cpu_cost": (setup["speed_ms_per_matmul"]
                                  if cpu is cost else
                                  probe_inputs.probe_speed(
                                      inputs.results_dir, inputs.cpu_source)),
                     "order_penalty": probe_inputs.probe_speed(
                         inputs.results_dir, inputs.penalty_source)},
                 "lone_in_situ": {
                     t: v for t, v in sorted(inputs.lone_in_situ.items())
                     if t not in inputs.traced.disturbed},
                 "settings": arguments,
                 "measured_compute_s": inputs.results["compute_s"],
                 "measured_comm_s": inputs.results["comm_s"],
                 "simulated_comm_s": float(execution.repeated_seconds(
                     cost, inputs.total_bytes, execution.ExecutionModel(
                         cpu=cpu, link_burst=inputs.link_burst))),
                 "link": {"rate": setup["link_rate"],
                          "burst_bytes": emulated_link.link_burst_bytes(
                              setup["link_rate"]),
                          "burst_s": inputs.link_burst,
                          "cpu_bound": (bool(inputs.link_burst) and
                                        cpu is cost)}},
      "missing": missing,
  }


def validate(results_dir: str, gpu: str = "v100", cost_fallback: str = "comm",
             cpu_cost: str = "auto", comm_cpu_share: str = "traces",
             bytes_cpu_share: str = "traces",
             block_overhead_ms: str = "traces",
             block_startup_ms: str = "traces",
             forward_share: str = "traces",
             reference: str = "median",
             order_penalty: str = "auto",
             latency_behind_bytes: bool = True,
             layer_times: str = "flops",
             lone_collective: str = "traces",
             lone_tolerance: float = LONE_TOLERANCE,
             compute_from: str = "compute_alone",
             input_work: str = INPUT_WORK_DEFAULT) -> Dict[str, Any]:
  """Predicts every row of RESULTS_DIR/results.json; see the module doc.

  Args:
    results_dir: a `scripts/bench.py` output directory.
    gpu: GPU of the FLOPs model (per-op shape only).
    cost_fallback: "comm" or "trace", without cost_model.json.
    cpu_cost: "auto", "none", or a results directory / cost_model.json.
    comm_cpu_share: "traces" or a number in (0, 1].
    bytes_cpu_share: "traces" or a number in (0, 1]; see
      `ExecutionModel.bytes_cpu_share` and `overlap_fit`.
    block_overhead_ms: "traces" or milliseconds.
    block_startup_ms: "traces" or milliseconds.
    forward_share: "traces", "flops" or a number in (0, 1).
    reference: "median" (results.json's medians) or "fastest" (every
      row's fastest repeat, and the fastest compute-alone and
      communication-alone runs of details.json).
    order_penalty: "auto", "none" or a runs.jsonl of
      scripts/bench_arrival_order.py
      (`probe_inputs.order_penalty_runs`).
    latency_behind_bytes: see `ExecutionModel.latency_behind_bytes`.
    layer_times: the DAG's per-op times, without a profile.json: "flops"
      (the GPU FLOPs model's) or "measured" (each layer's median share of
      the step in the newest step profile beside the directory; the FLOPs
      model's where there is none); either is scaled to the measured
      compute.
    lone_collective: "traces" (rescale the inputs measured alone where
      the other rows' traces show a collective released alone taking more
      than `lone_tolerance` longer or shorter, `_lone_ratio`) or "none".
    lone_tolerance: that fraction (`LONE_TOLERANCE`, whose comment says
      why).
    compute_from: "compute_alone" (the DAG's compute is the measured
      compute alone), "traces" or "step_gaps" (that times the factor that
      brings the rows' median traced over modelled first backward end, or
      gap before a block's second step, to 1, found by up to
      `COMPUTE_PASSES` passes over all rows, fewer where a pass does not
      move it: checks of how much of the errors the compute explains, not
      the default).
    input_work: "startups", "gaps" or "none" (`INPUT_WORK`, whose comment
      says what each does; "gaps" predicts every row twice).

  Returns:
    {"rows": {NAME@K: {"scheduler", "unroll", "measured_s", "predicted_s",
    "error", "planner_model_s", "plan", "model", "calibration"}},
    "max_abs_error", "median_abs_error", "target", "inputs": {where each
    input came from}, "missing": [what the benchmark should record]}.

  Raises:
    ValueError: if the directory has no results.json, or on a bad setting.
  """
  results = _read_results(results_dir)
  settings = _row_settings(comm_cpu_share, bytes_cpu_share, block_overhead_ms,
                           block_startup_ms, forward_share, reference,
                           latency_behind_bytes, lone_tolerance, input_work)
  details = results_files.read_json(os.path.join(results_dir,
                                                 "details.json")) or {}
  _check_choices(lone_collective, lone_tolerance, reference, compute_from)
  factor, passes = 1.0, []
  while True:
    inputs = _directory_inputs(results_dir, results, details, gpu,
                               cost_fallback, cpu_cost, order_penalty,
                               layer_times, lone_collective, reference,
                               factor)
    rows, stand_in_plans = {}, False
    for name, row in inputs.results["schedulers"].items():
      rows[name], stand_in = _predicted_row(name, row, inputs, settings)
      stand_in_plans |= stand_in
    if input_work == "gaps":
      # The first pass took no input work (no cap): each row's second
      # takes as much as the other rows' gaps say.
      caps = _gap_excess(rows)
      for name, row in inputs.results["schedulers"].items():
        rows[name], _ = _predicted_row(
            name, row, inputs,
            settings._replace(input_work_cap=caps.get(name)))
    if compute_from == "compute_alone":
      break
    ratio = trace_calibration.traced_over_modelled(
        rows.values(), COMPUTE_MEASURES[compute_from][0])
    moved = (len(passes) == 0 or ratio is None or abs(
        ratio - passes[-1]["traced_over_modelled"]) >= COMPUTE_CONVERGED)
    passes.append({"factor": factor, "traced_over_modelled": ratio})
    if (ratio is None or _compute_settled(ratio) or not moved or
        len(passes) == COMPUTE_PASSES):
      break
    factor = _next_compute_factor(passes)
  # Only off the default, so that every directory's table stays as it was.
  arguments = {} if compute_from == "compute_alone" else {
      "compute_from": compute_from}
  if input_work != INPUT_WORK_DEFAULT:
    arguments["input_work"] = input_work
  report = _report(rows, stand_in_plans, inputs, {
      "cost_fallback": cost_fallback, "cpu_cost": cpu_cost,
      "comm_cpu_share": comm_cpu_share, "bytes_cpu_share": bytes_cpu_share,
      "block_overhead_ms": block_overhead_ms,
      "block_startup_ms": block_startup_ms, "forward_share": forward_share,
      "layer_times": layer_times, "reference": reference,
      "order_penalty": order_penalty,
      "latency_behind_bytes": latency_behind_bytes,
      "lone_collective": lone_collective, "lone_tolerance": lone_tolerance,
      **arguments})
  if passes:
    report["inputs"]["compute_from_traces"] = passes
  return report


def _fixed(value: Optional[float], fmt: str) -> str:
  return "-" if value is None else fmt.format(value)


def _ms(x: Optional[float], fmt: str = "{:.1f}") -> str:
  return _fixed(None if x is None else x * 1e3, fmt)


def _next_compute_factor(passes: List[Dict[str, Any]]) -> float:
  """--compute_from's next factor: the last one times its ratio, or,
  once two passes bracket 1, the geometric middle of the closest two
  (a median over rows moves in jumps, so the ratio can overshoot)."""
  last = passes[-1]
  below = [p["factor"] for p in passes if p["traced_over_modelled"] < 1]
  above = [p["factor"] for p in passes if p["traced_over_modelled"] > 1]
  if not below or not above:
    return last["factor"] * last["traced_over_modelled"]
  # A larger factor lengthens the model's compute: ratios below 1 are of
  # factors too large.
  return math.sqrt(min(below) * max(above))


def _compute_settled(ratio: float) -> bool:
  """Whether --compute_from's traced over modelled ratio is 1."""
  return abs(ratio - 1) <= COMPUTE_CONVERGED


def _compute_passes_lines(passes: Optional[List[Dict[str, Any]]],
                          compute_from: Optional[str]) -> List[str]:
  """The table's line on --compute_from's passes, if it ran."""
  if not passes:
    return []
  last = passes[-1]["traced_over_modelled"]
  settled = last is not None and _compute_settled(last)
  return [f"- Compute from the traces (--compute_from={compute_from}), the "
          f"rows' median {COMPUTE_MEASURES[compute_from][1]} "
          "traced over modelled, by the factor on the compute alone: " +
          ", ".join(f"x{p['factor']:.3f} gives " + (
              "no trace" if p["traced_over_modelled"] is None else
              f"{p['traced_over_modelled']:.3f}") for p in passes) +
          ("." if settled else
           f"; NOT 1: the rows above are at x{passes[-1]['factor']:.3f}, "
           "the measure did not follow the compute "
           f"({COMPUTE_MEASURES[compute_from][2]}) or the passes ran out.")]


def _input_taken_lines(taken: Optional[Dict[str, float]]) -> List[str]:
  """The table's line on the traced time of taking a block's batches."""
  if not taken:
    return []
  by_k = {}
  for row, seconds in taken.items():
    by_k.setdefault(split_name(row)[1], []).append(seconds)
  return ["- Batches taken from the iterator at a block's start, eagerly "
          "(tf_preempt.keras.unroll_steps, K >= 2; stock Keras's K = 1 "
          "function takes its batch inside the graph, untimed), the median "
          "per block of each row's trace: " + ", ".join(
              f"{row} {v * 1e3:.2f} ms" for row, v in taken.items()) +
          "; over the rows " + ", ".join(
              f"K={k} {statistics.median(v) * 1e3:.2f} ms"
              for k, v in sorted(by_k.items())) +
          ". For reading only: the fitted start-ups (su) hold it."]


def format_table(report: Dict[str, Any]) -> str:
  """A markdown table of `validate`'s result, with its inputs."""
  inputs = report["inputs"]
  s = inputs["setup"]
  lines = [
      f"Simulator vs measured: {s['model']}, {s['workers']} workers, global "
      f"batch {s['global_batch_size']} ({inputs['results_dir']}).",
      "",
      *_input_lines(inputs),
      "",
      f"Measured: each row's {inputs['settings']['reference']} repeat.",
      "",
      "| row | measured ms | predicted ms | error | planner model ms | "
      "colls | plan | fwd | cpu / alpha ms | share | bytes | ovh ms | "
      "su ms | late0 | pen ms | lone | note |",
      "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---:|---|",
      *(_row_line(name, r) for name, r in report["rows"].items()),
      *_verdict_lines(report)]
  if report["missing"]:
    lines += ["", "Not recorded by the benchmark (stand-ins used above):"]
    lines += [f"- {m}" for m in report["missing"]]
  return "\n".join(lines) + "\n"


def _input_lines(inputs: Dict[str, Any]) -> List[str]:
  """The table's list of its inputs and where each came from."""
  cpu = inputs["cpu_cost"]
  link = inputs["link"]
  return [
      f"- Per-op times: {inputs['compute']}.",
      *_compute_passes_lines(inputs.get("compute_from_traces"),
                             inputs["settings"].get("compute_from")),
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
      f"- Early compute (in a block of K steps, the later steps' work "
      f"that reads no updated weight, dropout's random masks, runs at its "
      f"start, delaying the first step's forward pass): share "
      f"{inputs.get('early_share', 0.0):.3f} of a step, "
      f"{inputs.get('early_compute_s', 0.0) * 1e3:.2f} ms "
      f"({inputs.get('early_source', 'not modelled')}).",
      *_input_taken_lines(inputs.get("input_taken_s")),
      "- A collective released alone with task 0 / task 1 reaching it "
      "last (two workers, this link rate; seconds of traffic by which a "
      "rank's half exceeds the bucket -> seconds from the last arrival, "
      "from scripts/bench_arrival_order.py): " +
      (", ".join(f"{x * 1e3:.1f} -> {t0 * 1e3:.1f} / {t1 * 1e3:.1f} ms"
                 for x, _, t0, t1 in inputs["order_penalty"]) or "none") +
      f" ({inputs['order_penalty_source']}); mixed per row by the share "
      "of blocks task 0 started late in the other rows' traces of its K "
      "and kind, fused or one collective per tensor (late0); the penalty "
      "(pen, for one collective of the whole gradient) is what that mix "
      "takes beyond the "
      "model's own time for the collective alone, added to a block's "
      "first collectives released alone on an idle core.",
      "- Host speed (ms per matmul of tf_preempt.bench.speed_worker's "
      "chain; the probes of the directory's machine are taken nearest to "
      "its reading): " + ", ".join(
          f"{k.replace('_', ' ')} " + ("not read" if v is None else
                                      f"{v:.3f}")
          for k, v in (inputs.get("speed_ms_per_matmul") or {}).items()) +
      ".",
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
      "collective's fixed work while compute runs (share), the core share "
      "of its bytes while compute runs (bytes: fitted to the backward "
      "pass's end and the first collective's end of the rows that overlap "
      "them, 1 without such rows), the per-block overhead "
      "(ovh: a block's end less its last traced collective's end, less "
      "the modelled sparse all-gathers that follow that collective; a part "
      "per K and the tensor updates still queued when the row's last "
      "collective ends, fitted less task 0's start lag of the next block, "
      "plus the mean lag of the rows of its K and kind) and the "
      "block's start-up before its first op (su, per K). colls: the "
      "plan's collectives the runtime issues.",
      "- A collective released alone, in situ (lone): the first "
      "collective's time from the last worker's arrival in the other "
      "rows' traces that reduce the whole gradient in one collective "
      "after the backward pass (" + (", ".join(
          f"{t.split('.')[0]} {v * 1e3:.1f} ms" for t, v in sorted(
              (inputs.get("lone_in_situ") or {}).items())) or "none") +
      "), over what the row's model gives it as that row ran. Where the "
      "median ratio is more than "
      f"{inputs['settings']['lone_tolerance'] * 100:.0f}% off 1, the "
      "inputs measured alone (cost, CPU cost, arrival-order points) are "
      "scaled until it is 1: lone is that factor (1: kept; -: no such "
      "traces).",
      "- Traces of disturbed runs (more than 10% slower than their row's " +
      ("median: they are of its median run"
       if inputs.get("traces_of_median_runs")
       else "fastest repeat") + "), used for no calibration: " +
      (", ".join(inputs["disturbed_traces"]) or "none") + "."]


def _row_line(name: str, r: Dict[str, Any]) -> str:
  """A row of the table."""
  err = "-" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
  c = r.get("calibration") or {}
  lone = f"{c['lone_scale']:.2f}" if c.get("lone_from_traces") else "-"
  return (
      f"| {name} | {r['measured_s'] * 1e3:.1f} | {_ms(r['predicted_s'])} "
      f"| {err} | {_ms(r.get('planner_model_s'))} | "
      f"{r.get('collectives', '-')} | {r.get('plan', '-')} | "
      f"{_fixed(c.get('forward_share'), '{:.2f}')} | "
      f"{_ms(c.get('cpu_fixed_s'), '{:.2f}')} / "
      f"{_ms(c.get('alpha_s'), '{:.2f}')} | "
      f"{_fixed(c.get('comm_cpu_share'), '{:.3f}')} | "
      f"{_fixed(c.get('bytes_cpu_share'), '{:.2f}')} | "
      f"{_ms(c.get('block_overhead_s'))} | "
      f"{_ms(c.get('block_startup_s'))} | "
      f"{_fixed(c.get('task0_late_share'), '{:.2f}')} | "
      f"{_ms(c.get('order_penalty_whole_s'))} | {lone} | "
      f"{r.get('note', '')} |")


def _verdict_lines(report: Dict[str, Any]) -> List[str]:
  """The table's closing line: the largest error against the target."""
  worst = report["max_abs_error"]
  if worst is None:
    return []
  errors = [r["error"] for r in report["rows"].values()
            if r["error"] is not None]
  verdict = "meets" if worst <= report["target"] else "misses"
  within = sum(1 for e in errors if abs(e) <= report["target"])
  return ["", f"max |error| {worst * 100:.1f}% ({verdict} the "
          f"{report['target'] * 100:.0f}% target; {within} of "
          f"{len(errors)} rows within it); median "
          f"{report['median_abs_error'] * 100:.1f}%."]


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
                      layer_times=FLAGS.layer_times,
                      order_penalty=FLAGS.order_penalty,
                      latency_behind_bytes=FLAGS.latency_behind_bytes,
                      lone_collective=FLAGS.lone_collective,
                      lone_tolerance=FLAGS.lone_tolerance,
                      compute_from=FLAGS.compute_from,
                      input_work=FLAGS.input_work)
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
