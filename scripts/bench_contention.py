r"""How much core does an all-reduce take from the compute it overlaps?

  python scripts/bench_contention.py [--bandwidth 2gbit]
      [--sizes 200000,1000000,2100000,3260000] [--heap tensorflow|keep]
      [--out DIR] [--json]

Launches two workers of `tf_preempt.bench.contention_worker` (stock
MultiWorkerMirroredStrategy, RING) over the emulated link, each pinned to its
core as in the benchmarks, once per size named (a size named again is launched
again). In every round each worker runs a chain of matmuls alone, one
all-reduce alone, and the two at once. Per launch it prints the medians over
the rounds after the warm-up (of both workers): the chain alone, the
all-reduce alone, and, together, how much longer the chain took (the core the
collective took from it: its gRPC threads and the kernel's network work) and
when the collective ended. Then the CPU cost of a collective while compute
runs (`fit_cpu_cost`: per byte, the least-squares slope of each size's median
loss against the bytes; fixed, the smallest size's loss less its bytes' part),
which `scripts/validate_sim.py --cpu_cost=DIR/cpu_cost.json` (and
`--cpu_cost=auto`, from a directory named *contention* beside the results, of
the same link rate, heap mode and machine, which the files record) takes.
`--heap` is the workers' `tf_preempt.configure_heap` mode (as the training
rows'). `--compute=model` puts `--model`'s own forward and backward pass
(`--passes` of them, one after another) beside the all-reduce instead of
the chain; a collective that outlasts the compute stops taking from it, so
its loss is cut short (the text output says where). `--out DIR` writes
runs.jsonl (one line per launch) and cpu_cost.json there.
Prints numbers only; nothing here is asserted.
"""

import json
import os
import statistics
import sys
from typing import Any, Dict, List, Mapping, Sequence

from absl import app
from absl import flags

from tf_preempt.bench import contention_worker
from tf_preempt.bench import runner
from tf_preempt.launch import launcher
from tf_preempt.launch import netem


def define_flags() -> None:
  flags.DEFINE_string("bandwidth", "2gbit", "Emulated link rate (tc tbf, "
                      "root); empty for loopback.")
  flags.DEFINE_list("sizes", ["200000", "1000000", "2100000", "3260000"],
                    "Bytes of the all-reduce, one launch each; a size "
                    "named again is launched again (the fit takes its "
                    "median).")
  contention_worker.define_shared_flags()
  flags.DEFINE_integer("warmup_rounds", 8, "Rounds left out of the medians.")
  flags.DEFINE_float("timeout_s", 600.0, "Time limit of each launch.")
  flags.DEFINE_string("out", None, "Write runs.jsonl and cpu_cost.json "
                      "here.")
  flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")


# An all-reduce that ends later than this after the compute, together,
# outlasted it: small ones end up to about 1 ms after it (their work waits
# for the compute thread), and a longer one's loss is cut short.
OUTLASTS_MS = 1.0


def summarize(worker_outputs: Sequence[Mapping[str, Any]],
              warmup_rounds: int) -> Dict[str, float]:
  """Medians over the rounds after the warm-up, over both workers.

  Args:
    worker_outputs: each worker's JSON line (`contention_worker`).
    warmup_rounds: leading rounds left out.

  Returns:
    {"compute_ms": the chain alone, "comm_ms": the all-reduce alone,
    "loss_ms": the chain together less the chain alone in the same round,
    "comm_end_ms": the all-reduce's end together, from the start,
    "after_compute_ms": the all-reduce's end together after the
    compute's, "rounds": rounds per worker used}.

  Raises:
    ValueError: if the workers ran different numbers of rounds or none
      are left after the warm-up.
  """
  rounds = [w["rounds"] for w in worker_outputs]
  if len({len(r) for r in rounds}) != 1:
    raise ValueError("the workers ran different numbers of rounds")
  used = [r[warmup_rounds:] for r in rounds]
  if not used[0]:
    raise ValueError(f"no rounds after {warmup_rounds} warm-up rounds")
  figures: Dict[str, List[float]] = {"compute_ms": [], "comm_ms": [],
                                     "loss_ms": [], "comm_end_ms": [],
                                     "after_compute_ms": []}
  for worker in used:
    for row in worker:
      compute = row["compute"][1] - row["compute"][0]
      figures["compute_ms"].append(compute * 1e3)
      figures["comm_ms"].append((row["comm"][2] - row["comm"][0]) * 1e3)
      both = row["both"]
      figures["loss_ms"].append((both[1] - both[0] - compute) * 1e3)
      figures["comm_end_ms"].append((both[2] - both[0]) * 1e3)
      figures["after_compute_ms"].append((both[2] - both[1]) * 1e3)
  out = {k: statistics.median(v) for k, v in figures.items()}
  out["rounds"] = len(used[0])
  return out


def fit_cpu_cost(rows: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
  """The CPU cost of a collective while compute runs, from the losses.

  The per-byte cost is the slope of the least-squares line of the
  compute's loss against the bytes; the fixed cost is what the smallest
  collective's loss leaves after its bytes' part. (The line's own
  intercept is not the fixed cost: bytes that fit the link's token
  bucket cost the core less than bytes held to the rate, so the large
  sizes, which steer the line, are steeper than the small ones and the
  line meets 0 bytes below the small sizes' fixed part: 0.56 ms against
  0.99 at 2 Gbit/s here, where the traces' small collectives show a
  fixed CPU part of 0.94-1.28 ms.)

  A size launched more than once (`--sizes` naming it again) counts by
  its median loss: on a noisy machine one launch of a size can lose a
  quarter of what another does (0.96 against 4.05 ms at 100 KB and 200
  Mbit/s on 6 December), and two passes over the sizes fitted 4.6 and
  5.4 ns/B at 2 Gbit/s, 3.5 and 10.6 at 200 Mbit/s.

  Args:
    rows: one per launch, {"nbytes", "loss_ms", ...} (`summarize` plus
      the size), at least two sizes.

  Returns:
    {"alpha": seconds, "beta": seconds per byte, "samples": {bytes:
    median seconds}, "source"}: a `tf_preempt.plan.CostModel` dict (both
    at least 0).

  Raises:
    ValueError: with fewer than two sizes, or rows of different computes.
  """
  from tf_preempt.plan import cost as cost_lib  # pylint: disable=g-import-not-at-top
  losses: Dict[int, List[float]] = {}
  for r in rows:
    losses.setdefault(r["nbytes"], []).append(r["loss_ms"] * 1e-3)
  samples = {n: statistics.median(v) for n, v in sorted(losses.items())}
  if len(samples) < 2:
    raise ValueError("the fit needs at least two sizes")
  slope = cost_lib.CostModel.fit(list(samples), list(samples.values())).beta
  smallest = min(samples)
  fixed = max(0.0, samples[smallest] - slope * smallest)
  # Rows written before --compute have no "compute": the chain's.
  computes = {str(r.get("compute", "chain")) for r in rows}
  if len(computes) > 1:
    raise ValueError(f"the rows ran different computes {sorted(computes)}: "
                     "one fit is of one compute")
  (compute,) = computes
  return dict(alpha=fixed, beta=slope, samples={
      str(n): loss for n, loss in samples.items()}, source=(
          "scripts/bench_contention.py: the time the compute on the "
          f"worker's core ({compute}) lost to one concurrent all-reduce (2 "
          "workers, stock MultiWorkerMirroredStrategy, RING); per byte: the "
          "least-squares slope over the sizes (a size's median loss over "
          "its launches); fixed: the smallest size's loss less its bytes' "
          "part"))


def main(argv: Sequence[str]) -> int:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  f = flags.FLAGS
  try:
    sizes = [int(s) for s in f.sizes]
  except ValueError:
    raise app.UsageError(f"--sizes must be integers, got {f.sizes}") from None
  if (not sizes or min(sizes) < 4 or f.ops < 1 or f.matrix < 1 or
      f.passes < 1 or f.warmup_rounds >= f.rounds):
    raise app.UsageError("--sizes must be at least 4 bytes each, --ops, "
                         "--matrix and --passes positive, --warmup_rounds "
                         "fewer than --rounds")
  if f.passes > 1 and f.compute != "model":
    raise app.UsageError("--passes is of --compute=model; the chain's "
                         "length is --ops")
  link = netem.LinkConfig(rate=f.bandwidth) if f.bandwidth else None
  compute = (f"model:{f.model}" + (f"x{f.passes}" if f.passes > 1 else "")
             if f.compute == "model" else f"chain:{f.ops}x{f.matrix}")
  # The CPU cost is this machine's: validate_sim matches it by this line.
  machine = runner.machine()
  rows = []
  for nbytes in sizes:
    command = [sys.executable, "-m", "tf_preempt.bench.contention_worker",
               f"--nbytes={nbytes}"] + [
                   f"--{name}={f[name].value}"
                   for name in contention_worker.SHARED_FLAGS]
    try:
      outputs = launcher.launch_for_stats(command, 2, link=link,
                                          timeout_s=f.timeout_s,
                                          **launcher.MEASUREMENT_WORKER)
      row = summarize(outputs, f.warmup_rounds)
      # How fast the host was for this size's launch: validate_sim matches
      # a directory to the probe of the nearest speed.
      row["speed_ms_per_matmul"] = runner.speed_reading(
          2, [f"--heap={f.heap}"], f.timeout_s)
    except (RuntimeError, ValueError, netem.EmulationUnavailable) as e:
      print(f"bench_contention: {e}", file=sys.stderr)
      return 1
    rows.append(dict(bandwidth=f.bandwidth or None, nbytes=nbytes, ops=f.ops,
                     matrix=f.matrix, heap=f.heap, compute=compute,
                     machine=machine, **row))
  cpu = fit_cpu_cost(rows) if len(set(sizes)) >= 2 else None
  if f.out:
    os.makedirs(f.out, exist_ok=True)
    with open(os.path.join(f.out, "runs.jsonl"), "w") as out:
      out.writelines(json.dumps(r) + "\n" for r in rows)
    if cpu is not None:
      with open(os.path.join(f.out, "cpu_cost.json"), "w") as out:
        json.dump(dict(cpu, bandwidth=f.bandwidth or None, heap=f.heap,
                       compute=compute, machine=machine,
                       speed_ms_per_matmul=statistics.median(
                           r["speed_ms_per_matmul"] for r in rows)),
                  out, indent=1)
  if f.json:
    print(json.dumps({"rows": rows, "cpu_cost": cpu}))
    return 0
  where = link.describe() if link else "loopback"
  print(f"2 workers, {where}; compute {compute}")
  for r in rows:
    print(f"  {r['nbytes']:>9d} B: compute alone {r['compute_ms']:.2f} ms, "
          f"all-reduce alone {r['comm_ms']:.2f} ms; together the compute "
          f"lost {r['loss_ms']:.2f} ms and the all-reduce ended at "
          f"{r['comm_end_ms']:.2f} ms" + (
              "" if r["after_compute_ms"] <= OUTLASTS_MS else
              f" (the all-reduce outlasted the compute by "
              f"{r['after_compute_ms']:.1f} ms: its loss is cut short; "
              f"more {'--passes' if f.compute == 'model' else '--ops'})"))
  if cpu is not None:
    print(f"CPU cost while computing: {cpu['alpha'] * 1e3:.3f} ms + "
          f"{cpu['beta'] * 1e9:.3f} ns/B")
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
