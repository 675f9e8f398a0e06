"""The cost of one collective timed alone (`CostModel`) of a results directory.

From its cost_model.json (on a token-bucket link refitted with the bucket:
`fit_alone`), a fit over its traced collectives, or the testbed's fixed
cost and its comm_s. Pure Python; numpy and the planner on first use.
"""

import os
from typing import Any, Dict, List, Sequence, Tuple

from tf_preempt.bench import results_files

# Fixed cost of one gRPC ring all-reduce of a few bytes timed alone on this
# testbed (2 CPU workers; README.md, "measured alpha about 1.8 ms"); used
# only for a directory without cost_model.json (this one, or the CPU-bound
# sibling of `probe_inputs.cpu_cost_model`).
GRPC_ALPHA_S = 1.8e-3


def _collective_samples(traces: Dict[str, Dict[str, Any]]
                        ) -> Tuple[List[float], List[float]]:
  """(bytes, seconds) of every traced collective with both."""
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
  given = results_files.read_json(os.path.join(results_dir,
                                               "cost_model.json"))
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
