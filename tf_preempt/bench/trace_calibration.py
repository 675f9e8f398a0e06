"""Leave-one-out calibration of the execution model from Chrome traces.

Per steady-state block of worker 0's trace: its head (start to the first
ready gradient), its first step's backward-pass end and first collective's
end, its tail (last collective to its end), its small collectives and
the gap between its steps (`trace_blocks`); their medians over the other
rows' traces (`calibrate`); and the robust fits to them of the per-block
overhead and of the forward share and block start-up (`lad_fit`,
`fit_block_head`). For reading only: a trace's first steps
(`first_step_medians`), and over a validation report's rows their traced
and modelled first-step measures (`first_step_pairs`) and the median
ratio of them (`traced_over_modelled`). Pure Python.
"""

import statistics
from typing import (Any, Callable, Collection, Dict, Iterable, List,
                    Optional, Sequence, Tuple)

# Collectives this small move almost no bytes: their duration while the
# backward pass computes is their fixed cost under contention.
SMALL_COLLECTIVE_BYTES = 64 << 10
# The calibration figures only traces with small collectives in flight
# together carry (see `calibrate`).
SMALL_COLLECTIVE_KEYS = ("small_s", "interval_s")
# Candidate seconds per tensor of the update work that follows the
# collective completing it (0 to 1 ms, in 10 us steps).
UPDATE_SLOPES_S = [i * 1e-5 for i in range(101)]


def trace_blocks(trace: Dict[str, Any]) -> List[Dict[str, Any]]:
  """Per steady-state block: head, tail and small-collective durations.

  The first block (tracing, connection set-up) is left out. A block needs
  the bench's compute events and the collectives' `iteration`, `bytes`
  and `ready_ns` args and the trace's `origin_ns`; without them, [].

  Args:
    trace: worker 0's Chrome trace of one row.

  Returns:
    Per block, in order: {"head_s": its start to its first ready
    gradient, "backward_end_s": its start to the last ready gradient of
    its first step, "first_step_s": its first step's collectives by
    start time, (start, end) from the block's start, "first_end_s": the
    first one's end, "last_step_ends": its last step's collectives,
    (end from the block's start, collective id) by end, "tail_s": its last
    collective's end to its end, "small_s":
    durations of its small collectives that ended while the backward
    pass computed, "interval_s": the times between the ends of two small
    collectives in flight together after the backward pass, "block_s":
    its length, "batch": its compute event's "batch" arg (Keras's index
    of its last step) or None, "step_gap_s": from its first step's last
    collective's end to its second step's first ready gradient, or None
    with one step, "input_s": the time it took to take its batches from
    the iterator before its function ran (the compute event's
    "input_us" arg) or None}.
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
    args = b.get("args") or {}
    batch, input_us = args.get("batch"), args.get("input_us")
    inside = [e for e in colls if start <= e["ts"] < end]
    if not inside:
      continue
    by_step = {}
    for e in inside:
      by_step.setdefault(e["args"]["iteration"], []).append(e)
    first = sorted(by_step[min(by_step)], key=lambda e: e["ts"])
    first_step = [((e["ts"] - start) * 1e-6, (e["ts"] + e["dur"] - start) *
                   1e-6) for e in first]
    last_step = sorted(((e["ts"] + e["dur"] - start) * 1e-6,
                        e["args"].get("collective_id"))
                       for e in by_step[max(by_step)])
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
    second = sorted(by_step)[1:2]
    step_gap = None if not second else (
        min(ready(e) for e in by_step[second[0]]) -
        max(e["ts"] + e["dur"] for e in first)) * 1e-6
    out.append({
        "head_s": (min(ready(e) for e in first) - start) * 1e-6,
        "backward_end_s": (max(ready(e) for e in first) - start) * 1e-6,
        "first_end_s": first_step[0][1],
        "first_step_s": first_step, "last_step_ends": last_step,
        "tail_s": (end - max(e["ts"] + e["dur"] for e in inside)) * 1e-6,
        "small_s": small, "interval_s": interval,
        "block_s": (end - start) * 1e-6,
        "batch": batch, "step_gap_s": step_gap,
        "input_s": None if input_us is None else input_us * 1e-6})
  return out


def input_medians(blocks_of: Dict[str, List[Dict[str, Any]]]
                  ) -> Dict[str, float]:
  """Each trace's median time of taking its blocks' batches, eagerly
  (`UnrolledStepFunction.last_input_ns`), where its blocks recorded it.

  Stock Keras's K=1 train function takes its batch inside the graph, so
  its blocks record none; nor do traces from before 7 December, evening,
  nor unrolled blocks on data that never runs out from 7 December, night
  on (they take their batches inside the graph too).

  Args:
    blocks_of: {trace name: its `trace_blocks`}.

  Returns:
    {trace name: seconds}, only the traces whose every block recorded it.
  """
  out = {}
  for name, blocks in sorted(blocks_of.items()):
    taken = [b.get("input_s") for b in blocks]
    if taken and all(t is not None for t in taken):
      out[name] = statistics.median(taken)
  return out


def calibrate(blocks_of: Dict[str, List[Dict[str, Any]]],
              exclude: Sequence[str], disturbed: Sequence[str] = ()
              ) -> Dict[str, Any]:
  """Medians over the traces of every row but those named in `exclude`.

  Args:
    blocks_of: {trace name: its `trace_blocks`}.
    exclude: trace names to leave out.
    disturbed: trace names to leave out too, except for the small-
      collective figures (`SMALL_COLLECTIVE_KEYS`) when no other trace has
      them: only some rows' traces measure them (many small collectives in
      flight), and a disturbed measurement beats none (the CPU part would
      fall back to all of alpha and the share to 1).

  Returns:
    {"heads": {trace: its blocks' times to their first ready gradient},
    "overlaps": {trace: per block (backward_end_s, first_end_s)},
    "tail_s": a block's last collective to its end, "small_s":
    durations of small collectives while the backward pass computed,
    "interval_s": the time between the ends of two small collectives in
    flight together after the backward pass (the part of a collective's
    fixed cost that does not overlap: its CPU work), "rows": the traces
    used, "tails": {trace: its blocks' tails}, "last_steps": {trace: its
    blocks' "last_step_ends"}, "batches": {trace: its blocks' "batch"},
    "from_disturbed": the
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
  by_trace, heads, overlaps, last_steps, batches = {}, {}, {}, {}, {}
  for name, blocks in sorted(blocks_of.items()):
    if name in exclude or not blocks:
      continue
    by_trace[name] = [b["tail_s"] for b in blocks]
    batches[name] = [b.get("batch") for b in blocks]
    last_steps[name] = [b["last_step_ends"] for b in blocks]
    tails += by_trace[name]
    heads[name] = [b["head_s"] for b in blocks]
    overlaps[name] = [(b["backward_end_s"], b["first_end_s"])
                      for b in blocks]
    for b in blocks:
      small += b["small_s"]
      interval += b["interval_s"]
  med = lambda v: statistics.median(v) if v else None
  return {"heads": heads, "overlaps": overlaps, "tail_s": med(tails),
          "small_s": med(small), "interval_s": med(interval),
          "rows": list(by_trace), "tails": by_trace,
          "last_steps": last_steps, "batches": batches}


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
  return lad_fit_terms([(g, lambda a, x=x: a * x, y) for g, x, y in samples],
                       slopes)


def lad_fit_terms(samples: Sequence[Tuple[Any, Callable[[float], float],
                                          float]],
                  params: Sequence[float]) -> Tuple[float, Dict[Any, float]]:
  """Least absolute deviations of y = intercept[group] + term(param).

  `lad_fit` with a term that need not be linear in the parameter (the
  update backlog: `update_backlog.backlog_s`).

  Args:
    samples: (group, term, y): term maps a candidate parameter to seconds.
    params: the candidate parameters.

  Returns:
    (param, {group: intercept}).
  """
  groups = sorted({g for g, _, _ in samples})

  def intercepts(a):
    residuals = {g: [] for g in groups}
    for g, term, y in samples:
      residuals[g].append(y - term(a))
    return {g: statistics.median(r) for g, r in residuals.items()}, residuals

  def deviation(a):
    o, residuals = intercepts(a)
    return sum(abs(r - o[g]) for g, rs in residuals.items() for r in rs)

  # The sum is piecewise linear in a slope and often flat over a range:
  # take the first of the candidates within round-off of the least, so
  # that the choice does not hang on the last bits of the samples.
  deviations = [deviation(a) for a in params]
  least = min(deviations)
  param = next(a for a, d in zip(params, deviations) if d <= least + 1e-12)
  return param, intercepts(param)[0]


def fit_block_head(samples: Sequence[Tuple[int, float, float]],
                   compute_s: float, share: Optional[float] = None,
                   default_share: Optional[float] = None,
                   early_s: float = 0.0
                   ) -> Tuple[Optional[float], Dict[int, float]]:
  """The forward share of compute and each K's block start-up, from heads.

  A block's head (its start to its first ready gradient) is modelled as
  `startup[K] + (K - 1) * early_s + compute_s * (share + (1 - share) * f)`,
  f the fraction of the backward pass before the first collective is ready
  (`first_ready_fraction`), early_s each later step's early compute
  (`ExecutionModel.early_compute`, run at the block's start). Rows that
  reduce everything in one collective (f = 1) measure the start-up
  alone; rows whose first collective holds only the last layers'
  gradients (f near 0) measure the forward share.
  Fitted by least absolute deviations (`lad_fit`, share in [0.05, 0.95]).

  Args:
    samples: (K, f, head seconds) per trace (its blocks' median head).
    compute_s: the measured compute of one step.
    share: a given forward share (not fitted), or None.
    default_share: the share when the samples cannot tell it (their f
      differ by less than 0.25) and none is given.
    early_s: seconds of each later step's early compute in a block.

  Returns:
    (share, {K: start-up seconds, >= 0}); share is None only if it was
    neither identifiable, given nor defaulted (then no start-ups).
  """
  if not samples:
    return (default_share if share is None else share), {}
  samples = [(k, f, h - early_s * (k - 1)) for k, f, h in samples]
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


def input_work_per_step(startups: Dict[int, float]) -> Optional[float]:
  """Seconds of input work per step that a block's start-up does for its
  later steps, from the start-ups fitted per K (`fit_block_head`).

  A block starts by taking its K batches from the iterator, eagerly, before
  the function runs (`tf_preempt.keras.unrolled` until 7 December, night;
  since then only on finite data): work per step, done at the block's
  start. The compute alone (a K=1 block per step) holds one
  batch's of it in every step, so the heads put one into the forward share
  and the rest, K - 1 batches', into the start-up of K. Its growth with K
  over K=1's is that rest. (The premise is the check's, and the traces
  of (h23)-(h25) do not bear it out: the K=1 rows and the compute alone
  run stock Keras's function, which takes its batch inside the graph,
  untimed; only the unrolled blocks of K >= 2 take theirs in Python
  (2.3-2.9 ms a block, `input_medians`), which the compute alone does not
  hold, and the growth is 0.3-1.4 times that.)

  The start-ups are `fit_block_head`'s, floored at 0: where K = 1's
  fitted start-up would be negative, the growth read here is the larger
  K's start-up alone, less than the growth of the unfloored fit.

  Args:
    startups: {K: start-up seconds}.

  Returns:
    The median over each K > 1 of (startup[K] - startup[1]) / (K - 1), at
    least 0; None without K = 1 or a K > 1.
  """
  if 1 not in startups:
    return None
  growth = [max(0.0, (u - startups[1]) / (k - 1))
            for k, u in startups.items() if k > 1]
  return statistics.median(growth) if growth else None


def first_step_pairs(rows: Iterable[Dict[str, Any]], measure: str
                     ) -> List[Tuple[float, float]]:
  """(traced, modelled) `measure` of the "first_step" of each validation
  report row (`scripts/validate_sim.py`'s) that has both."""
  return [(step["trace"][measure], step["model"][measure])
          for step in (r.get("first_step") for r in rows)
          if step and (step.get("trace") or {}).get(measure) is not None
          and step["model"].get(measure) is not None]


def traced_over_modelled(rows: Iterable[Dict[str, Any]],
                         measure: str = "backward_end_s") -> Optional[float]:
  """The median over validation report rows (`scripts/validate_sim.py`'s,
  each with its "first_step") of a first-step measure in the row's traces
  over the model's.

  Args:
    rows: the report's rows.
    measure: "backward_end_s" (the first backward pass's end) or
      "step_gap_s" (the gap before a block's second step, rows of K >= 2).

  Returns:
    The median ratio; None where no row has both, the model's above 0.
  """
  ratios = [traced / modelled
            for traced, modelled in first_step_pairs(rows, measure)
            if modelled > 0]
  return statistics.median(ratios) if ratios else None


def first_step_medians(blocks: Sequence[Dict[str, Any]]
                       ) -> Optional[Dict[str, Any]]:
  """A trace's first steps, the medians over its `trace_blocks`.

  Returns:
    {"backward_end_s", "collectives_s": [(start, end)] by start time, as
    many as every block has, "tail_s": the block's last collective to its
    end, and, where the blocks have two or more steps, "step_gap_s": the
    first step's last collective's end to the second step's first ready
    gradient}; None without blocks.
  """
  if not blocks:
    return None
  n = min(len(b["first_step_s"]) for b in blocks)
  gaps = [b["step_gap_s"] for b in blocks
          if b.get("step_gap_s") is not None]
  return {**({"step_gap_s": statistics.median(gaps)} if gaps else {}),
          "backward_end_s": statistics.median(
              b["backward_end_s"] for b in blocks),
          "tail_s": statistics.median(b["tail_s"] for b in blocks),
          "collectives_s": [
              tuple(statistics.median(b["first_step_s"][i][j]
                                      for b in blocks) for j in (0, 1))
              for i in range(n)]}
