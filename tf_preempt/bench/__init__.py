"""Side-by-side benchmark of the schedulers (`scripts/bench.py`).

`results` aggregates step times into the results.json schema (pure Python),
`timeline` draws the Gantt chart from the Chrome traces (matplotlib),
`runner` runs the interleaved benchmark, `comm_worker` is the worker
that times the all-reduce alone. The probes' workers: `arrival_worker`
times a stock all-reduce by which task reaches it last
(`scripts/bench_arrival_order.py`), `contention_worker` what a stock
all-reduce takes from compute it overlaps (`scripts/bench_contention.py`),
both on `stock_ring`'s strategy; `log_reduction_worker` times `fit` with and
without Keras's per-step reduction of the logs
(`scripts/bench_log_reduction.py`).

The pieces of `scripts/validate_sim.py`, which predicts a results
directory's rows with the execution model (pure Python, the planner loaded
on use): `results_files` reads the directory (JSON files, worker 0's
traces, the benchmark's setup), `emulated_link` gives its link's rate and
token bucket, `collective_cost` the cost of a collective timed alone,
`probe_inputs` what the probes beside it measured (the CPU cost of a
collective, the arrival-order penalty), `trace_calibration` the
leave-one-out figures and fits from the traces, `overlap_fit` the core
share of a collective's bytes while the compute runs (fitted through the
execution model to the traces), and `row_plans` the plan each row ran and
what the runtime issues of it.
"""
