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
"""
