"""Side-by-side benchmark of the schedulers (`scripts/bench.py`).

`results` aggregates step times into the results.json schema (pure Python),
`timeline` draws the Gantt chart from the Chrome traces (matplotlib),
`runner` runs the interleaved benchmark, `comm_worker` is the worker
that times the all-reduce alone, and `arrival_worker` the one that times a
stock all-reduce by which task reaches it last
(`scripts/bench_arrival_order.py`).
"""
