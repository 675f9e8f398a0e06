"""Aggregation of benchmark runs into the results.json schema. Pure Python.

Every ratio is a speed-up of the row over a reference: the reference's step
time divided by the row's, so > 1 means the row is faster.
`ratio_vs_lower_bound` is lower bound / step time, at most about 1: the
fraction of the ideal step time reached (0.91 is "within 10%").
"""

import statistics
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

# The prior-art schedulers the issue compares PACE against. `priority` is an
# ablation of PACE (its order without fusion or chunks), not a baseline.
BASELINES = ("tf_default", "tf_packed", "horovod", "ddp", "bytescheduler")
REFERENCE = "tf_default"

RESULT_KEYS = ("unroll", "step_s", "median_s", "ratio_vs_tf_default",
               "ratio_vs_best_baseline", "ratio_vs_lower_bound")
TOP_KEYS = ("schedulers", "compute_s", "comm_s", "lower_bound_s", "command",
            "machine")


def row_name(scheduler: str, unroll: int) -> str:
  """The name of a row: "NAME@K"."""
  return f"{scheduler}@{int(unroll)}"


def split_name(name: str) -> Tuple[str, int]:
  """("NAME", K) of "NAME@K"."""
  scheduler, _, unroll = name.rpartition("@")
  if not scheduler or not unroll.isdigit():
    raise ValueError(f"row name {name!r} is not NAME@K")
  return scheduler, int(unroll)


def lower_bound(compute_s: float, comm_s: float) -> float:
  """Best possible step time: compute and communication fully overlapped."""
  if compute_s <= 0 or comm_s < 0:
    raise ValueError(f"need compute_s > 0 and comm_s >= 0, got {compute_s}, "
                     f"{comm_s}")
  return max(compute_s, comm_s)


def block_estimate(compute_s: float, comm_s: float, unroll: int) -> float:
  """About the least step time of blocks of `unroll` steps.

  A block is one function call: its first step's compute (little is ready
  to send yet) and its last step's communication (nothing left to compute)
  overlap nothing, so a step takes about max + min / unroll of compute and
  communication. Not a strict bound: the first gradients are ready before
  the backward pass ends.
  """
  return max(compute_s, comm_s) + min(compute_s, comm_s) / unroll


def block_estimate_report(results: Mapping[str, Any], unroll: int) -> str:
  """`block_estimate` of a results.json and each row at `unroll` against it.

  Returns:
    Lines "estimate X ms" and "NAME@K Y ms = R of the estimate".
  """
  estimate = block_estimate(results["compute_s"], results["comm_s"], unroll)
  lines = [f"estimate {estimate * 1e3:.1f} ms at K={unroll}"]
  for name, row in sorted(results["schedulers"].items(),
                          key=lambda item: item[1]["median_s"]):
    if row["unroll"] == unroll:
      lines.append(f"{name} {row['median_s'] * 1e3:.1f} ms = "
                   f"{row['median_s'] / estimate:.3f} of the estimate")
  return "\n".join(lines)


def best_baseline(medians: Mapping[str, float],
                  unroll: Optional[int] = None) -> Optional[str]:
  """The fastest baseline row (at `unroll` if given), or None if none ran."""
  rows = [n for n in medians
          if split_name(n)[0] in BASELINES and
          (unroll is None or split_name(n)[1] == unroll)]
  if not rows:
    return None
  return min(rows, key=lambda n: (medians[n], n))


def aggregate(step_s: Mapping[str, Sequence[float]], compute_s: float,
              comm_s: float, command: str, machine: str) -> Dict[str, Any]:
  """Builds results.json from each row's per-run step times.

  Args:
    step_s: "NAME@K" -> the step time of each run (seconds; one per repeat).
      Must hold a tf_default row at K=1 (the reference).
    compute_s: step time with no collectives.
    comm_s: the gradient all-reduce alone, per step.
    command: the command line that produced the runs.
    machine: a description of the machine and its load.

  Returns:
    {"schedulers": {NAME@K: {"unroll", "step_s", "median_s",
    "ratio_vs_tf_default", "ratio_vs_best_baseline",
    "ratio_vs_lower_bound"}}, "compute_s", "comm_s", "lower_bound_s",
    "command", "machine"}. The best baseline is the fastest baseline row at
    any K (the strongest competitor).

  Raises:
    ValueError: on a row without runs, a bad name or no reference row.
  """
  reference = row_name(REFERENCE, 1)
  if reference not in step_s:
    raise ValueError(f"no {reference} row: it is the reference of the ratios")
  medians = {}
  for name, runs in step_s.items():
    split_name(name)
    if not runs or any(t <= 0 for t in runs):
      raise ValueError(f"row {name} needs positive step times, got {runs}")
    medians[name] = statistics.median(runs)
  bound = lower_bound(compute_s, comm_s)
  best = medians[best_baseline(medians)]
  rows = {}
  for name, runs in step_s.items():
    median = medians[name]
    rows[name] = {
        "unroll": split_name(name)[1],
        "step_s": [float(t) for t in runs],
        "median_s": float(median),
        "ratio_vs_tf_default": medians[reference] / median,
        "ratio_vs_best_baseline": best / median,
        "ratio_vs_lower_bound": bound / median,
    }
  return {"schedulers": rows, "compute_s": float(compute_s),
          "comm_s": float(comm_s), "lower_bound_s": float(bound),
          "command": command, "machine": machine}


def check_schema(results: Mapping[str, Any]) -> None:
  """Raises ValueError unless `results` has exactly the issue's schema."""
  if tuple(sorted(results)) != tuple(sorted(TOP_KEYS)):
    raise ValueError(f"top-level keys {sorted(results)} != {sorted(TOP_KEYS)}")
  for name, row in results["schedulers"].items():
    split_name(name)
    if tuple(sorted(row)) != tuple(sorted(RESULT_KEYS)):
      raise ValueError(f"{name}: keys {sorted(row)} != {sorted(RESULT_KEYS)}")
    if not isinstance(row["unroll"], int) or not all(
        isinstance(t, float) for t in row["step_s"]):
      raise ValueError(f"{name}: unroll must be an int, step_s floats")


def targets(results: Mapping[str, Any], pace: str) -> Iterable[Dict[str, Any]]:
  """The issue's targets for row `pace`: (label, measured, target, met).

  Targets: >= 1.35x vs tf_default@1; >= 1.15x vs the best baseline at K=1;
  >= 1.05x vs the best baseline at pace's K; step time within 10% of the
  lower bound.
  """
  rows = results["schedulers"]
  medians = {n: r["median_s"] for n, r in rows.items()}
  mine = medians[pace]
  k = split_name(pace)[1]
  out = [("vs tf_default@1", medians[row_name(REFERENCE, 1)] / mine, 1.35,
          row_name(REFERENCE, 1))]
  for label, unroll, goal in (("vs best baseline at K=1", 1, 1.15),
                              (f"vs best baseline at K={k}", k, 1.05)):
    best = best_baseline(medians, unroll)
    if best is not None:
      out.append((label, medians[best] / mine, goal, best))
  # "Within 10%": step time <= 1.1 x lower bound, as a speed-up ratio.
  out.append(("vs lower bound", results["lower_bound_s"] / mine, 1 / 1.1,
              "max(compute, comm)"))
  return [{"label": label, "measured": measured, "target": goal,
           "reference": ref, "met": measured >= goal - 1e-12}
          for label, measured, goal, ref in out]


def _settling(details: Mapping[str, Any]) -> str:
  """How the repeats were chosen, where the bench repeated until settled."""
  low, high = details.get("min_repeats"), details.get("max_repeats")
  tolerance = details.get("settle_tolerance")
  if low is None or high is None or tolerance is None or high <= low:
    return ""
  left = details.get("unsettled") or []
  return (f" (at least {low}, then repeated until every row's, reference's "
          f"and speed reading's median was within "
          f"{tolerance:.0%} of its fastest run, up to "
          f"{high}; " + (f"not settled at the cap: {', '.join(left)})"
                         if left else "all settled)"))


def markdown(results: Mapping[str, Any], details: Mapping[str, Any],
             pace: Optional[str] = None) -> str:
  """results.md: the table (with each row's settings) and the targets."""
  rows = results["schedulers"]
  settings = details.get("settings", {})
  lines = [
      f"Command: `{results['command']}`", "",
      f"Machine: {results['machine']}", "",
      f"{details.get('steps', '?')} steps per run, the first "
      f"{details.get('warmup_steps', '?')} not timed; a run's step time is "
      "the median of its timed steps on the slower worker; `median` is the "
      f"median over {details.get('repeats', '?')} interleaved run(s)"
      f"{_settling(details)}.", "",
      *([f"Host speed: {details['speed_ms_per_matmul']:.3f} ms per matmul "
         "(tf_preempt.bench.speed_worker's chain, the median of the "
         "interleaved speed readings).", ""]
        if details.get("speed_ms_per_matmul") else []),
      "| row | K | settings | runs (ms) | median (ms) | vs tf_default@1 | "
      "vs best baseline | vs lower bound |",
      "|---|---|---|---|---|---|---|---|"]
  best = best_baseline({n: r["median_s"] for n, r in rows.items()})
  for name, r in sorted(rows.items(), key=lambda kv: kv[1]["median_s"]):
    runs = ", ".join(f"{t * 1e3:.1f}" for t in r["step_s"])
    mark = " (best baseline)" if name == best else ""
    lines.append(
        f"| {name}{mark} | {r['unroll']} | "
        f"{settings.get(name, {}).get('description', '')} | {runs} | "
        f"{r['median_s'] * 1e3:.1f} | {r['ratio_vs_tf_default']:.3f} | "
        f"{r['ratio_vs_best_baseline']:.3f} | "
        f"{r['ratio_vs_lower_bound']:.3f} |")
  lines += [
      "", f"- compute alone (no collectives, per-worker batch, "
      f"--strategy=one_device): {results['compute_s'] * 1e3:.1f} ms/step",
      f"- communication alone (one all-reduce of all gradient bytes, no "
      f"compute): {results['comm_s'] * 1e3:.1f} ms/step",
      f"- lower bound max(compute, comm): "
      f"{results['lower_bound_s'] * 1e3:.1f} ms/step", ""]
  for label, times in details.get("prepass", {}).items():
    each = ", ".join(f"{int(b) >> 20} MiB: {t * 1e3:.1f} ms"
                     for b, t in times.items())
    lines.append(f"- pre-pass, {label} (one run each, K=1): {each}")
  if pace is not None and pace in rows:
    lines += ["", f"Targets of the issue for {pace}:", "",
              "| target | measured | goal | reference | met |",
              "|---|---|---|---|---|"]
    for t in targets(results, pace):
      lines.append(f"| {t['label']} | {t['measured']:.3f}x | "
                   f">= {t['target']:.3f}x | {t['reference']} | "
                   f"{'yes' if t['met'] else 'NO'} |")
  lines += ["", "Ratios are speed-ups (reference time / row time; > 1 is "
            "faster); vs lower bound is lower bound / row time (1.0 is "
            "ideal, >= 0.909 is within 10%). The best baseline is the "
            "fastest of tf_default, tf_packed, horovod, ddp, bytescheduler "
            "at any K; priority is PACE's order without fusion or chunks "
            "(an ablation, not a baseline).", ""]
  return "\n".join(lines)
