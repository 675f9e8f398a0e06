"""The calibration from made-up Chrome traces of the bench runtime."""

import pytest

from tf_preempt.bench import trace_calibration
from tf_preempt.testing import bench_records


def test_blocks_measure_head_tail_and_small_collectives():
  # Block 0 (tracing) is skipped. Block 1 [1000, 1100] ms: gradients ready
  # at 1030 (2 MB) and 1060 (last); two small collectives: one during the
  # backward pass (1031-1041: 10 ms), and after it two in flight together
  # ending 1.5 ms apart; the last collective ends 5 ms before the block.
  ms = 1000.0
  colls = [
      bench_records.collective(3, 0, 2 << 20, 1030 * ms, 1030 * ms, 40 * ms),
      bench_records.collective(3, 1, 1024, 1031 * ms, 1031 * ms, 10 * ms),
      bench_records.collective(3, 2, 512, 1060 * ms, 1080 * ms, 10 * ms),
      bench_records.collective(3, 3, 512, 1060 * ms, 1081 * ms, 10.5 * ms),
      bench_records.collective(3, 4, 4 << 20, 1060 * ms, 1091.5 * ms, 3.5 * ms),
  ]
  trace = bench_records.trace([bench_records.block(0, 0, 1000 * ms),
                               bench_records.block(1, 1000 * ms, 100 * ms)],
                              colls)
  (block,) = trace_calibration.trace_blocks(trace)
  assert block["head_s"] == pytest.approx(0.030)
  # The backward pass ends with the last ready gradient (1060); the first
  # collective to start (1030) ends 40 ms later.
  assert block["backward_end_s"] == pytest.approx(0.060)
  assert block["first_end_s"] == pytest.approx(0.070)
  # The first step's collectives by start time, from the block's start.
  assert block["first_step_s"] == [
      pytest.approx((a * 1e-3, b * 1e-3)) for a, b in
      ((30, 70), (31, 41), (80, 90), (81, 91.5), (91.5, 95))]
  # One block: its own figures are the medians.
  assert trace_calibration.first_step_medians([block]) == {
      "backward_end_s": block["backward_end_s"],
      "collectives_s": block["first_step_s"], "tail_s": block["tail_s"]}
  assert trace_calibration.first_step_medians([]) is None
  # The last step's collectives (one step here) by end: (end, id).
  assert block["last_step_ends"] == [
      pytest.approx((b * 1e-3, i)) for b, i in
      ((41, 1), (70, 0), (90, 2), (91.5, 3), (95, 4))]
  assert block["tail_s"] == pytest.approx(0.005)
  assert block["small_s"] == pytest.approx([0.010])
  assert block["interval_s"] == pytest.approx([0.0015])
  assert block["block_s"] == pytest.approx(0.100)
  # The block's "batch" (Keras's index of its last step), if traced.
  assert block["batch"] is None
  trace["traceEvents"][1] = dict(trace["traceEvents"][1],
                                 args={"batch": 7})
  assert trace_calibration.trace_blocks(trace)[0]["batch"] == 7
  # A trace without the runtime's records gives nothing, not an error.
  assert trace_calibration.trace_blocks({"traceEvents": colls}) == []
  # One step per block: no gap between steps.
  assert block["step_gap_s"] is None


def test_blocks_measure_the_gap_between_their_steps():
  # Two blocks of K=2, [1000, 1100] and [1100, 1200] ms: step 1's last
  # collective ends 40 ms into the block (then 35 ms), step 2's first
  # gradient is ready 52 ms in (then 51 ms): gaps of 12 and 16 ms.
  ms = 1000.0
  colls = []
  for start, first_end, second_ready in ((1000, 40, 52), (1100, 35, 51)):
    step = 3 if start == 1000 else 5
    colls += [
        bench_records.collective(step, 0, 1024, (start + 10) * ms,
                                 (start + 10) * ms, 5 * ms),
        bench_records.collective(step, 1, 1024, (start + 20) * ms,
                                 (start + 20) * ms, (first_end - 20) * ms),
        bench_records.collective(step + 1, 0, 1024,
                                 (start + second_ready) * ms,
                                 (start + second_ready) * ms, 5 * ms),
        bench_records.collective(step + 1, 1, 1024,
                                 (start + second_ready + 9) * ms,
                                 (start + second_ready + 9) * ms, 5 * ms)]
  trace = bench_records.trace(
      [bench_records.block(0, 0, 1000 * ms),
       bench_records.block(1, 1000 * ms, 100 * ms),
       bench_records.block(2, 1100 * ms, 100 * ms)], colls)
  blocks = trace_calibration.trace_blocks(trace)
  assert [b["step_gap_s"] for b in blocks] == [pytest.approx(0.012),
                                                pytest.approx(0.016)]
  assert trace_calibration.first_step_medians(blocks)[
      "step_gap_s"] == pytest.approx(0.014)
  # Traces before 7 December record no time of taking the batches.
  assert [b["input_s"] for b in blocks] == [None, None]
  assert trace_calibration.input_medians({"k2": blocks}) == {}
  # The unrolled loop's blocks do (the compute event's "input_us").
  for event, input_us in zip(trace["traceEvents"][1:3], (2500.0, 3500.0)):
    event["args"] = {"batch": 1, "input_us": input_us}
  blocks = trace_calibration.trace_blocks(trace)
  assert [b["input_s"] for b in blocks] == [pytest.approx(0.0025),
                                            pytest.approx(0.0035)]
  # A trace counts only if every block recorded it.
  partial = [blocks[0], dict(blocks[1], input_s=None)]
  assert trace_calibration.input_medians(
      {"k2": blocks, "k1": [], "partial": partial}) == {
          "k2": pytest.approx(0.003)}


def test_calibration_leaves_the_row_out(tmp_path):
  ms = 1000.0

  def trace(head_ms, tail_ms):
    colls = [bench_records.collective(3, 0, 2 << 20, (1000 + head_ms) * ms,
                                      (1000 + head_ms) * ms, 10 * ms),
             bench_records.collective(3, 1, 4 << 20, 1050 * ms, 1050 * ms,
                                      (50 - tail_ms) * ms)]
    return bench_records.trace([bench_records.block(0, 0, 1000 * ms),
                                bench_records.block(1, 1000 * ms, 100 * ms)],
                               colls)

  traces = {"pace_k1.worker-0.json": trace(20, 4),
            "ddp_k1.worker-0.json": trace(30, 6),
            "horovod_k1.worker-0.json": trace(40, 8)}
  calib = trace_calibration.calibrate(
      {name: trace_calibration.trace_blocks(trace)
       for name, trace in traces.items()},
      exclude={"ddp_k1.worker-0.json"})
  assert calib["rows"] == ["horovod_k1.worker-0.json",
                           "pace_k1.worker-0.json"]
  assert calib["heads"] == {"horovod_k1.worker-0.json": [pytest.approx(0.04)],
                            "pace_k1.worker-0.json": [pytest.approx(0.02)]}
  assert calib["tail_s"] == pytest.approx(0.006)  # median of 4 and 8
  # Per block of the rows used: the backward pass's end (the last ready
  # gradient, 50 ms) and the first collective's end (head + 10 ms).
  assert calib["overlaps"] == {
      "horovod_k1.worker-0.json": [(pytest.approx(0.05), pytest.approx(0.05))],
      "pace_k1.worker-0.json": [(pytest.approx(0.05), pytest.approx(0.03))]}
  assert calib["small_s"] is None and calib["interval_s"] is None


def test_lad_fit_ignores_an_outlier():
  # y = 2 + 0.5 x in group "a", 7 + 0.5 x in group "b"; one sample of "a"
  # disturbed by +30. Least squares would tilt the slope; LAD does not.
  samples = [("a", x, 2 + 0.5 * x) for x in (0, 2, 4, 6)]
  samples += [("b", x, 7 + 0.5 * x) for x in (1, 3, 5)]
  samples.append(("a", 8, 2 + 0.5 * 8 + 30))
  slope, intercepts = trace_calibration.lad_fit(samples,
                                                [i / 10 for i in range(11)])
  assert slope == pytest.approx(0.5)
  assert intercepts == {"a": pytest.approx(2), "b": pytest.approx(7)}


def test_lad_fit_terms_fits_a_term_not_linear_in_its_parameter():
  # y = c[g] + max(0, p * n - gap): the update backlog's shape. The gaps
  # tell p apart from the intercepts: a linear slope could not fit both
  # the samples whose queue drained and those where it did not.
  def term(n, gap):
    return lambda p: max(0.0, p * n - gap)

  p_true, c = 0.2, {1: 2.0, 2: 1.0}
  samples = [(k, term(n, gap), c[k] + term(n, gap)(p_true))
             for k in (1, 2) for n, gap in ((1, 0), (12, 1.5), (22, 0),
                                            (6, 3.0), (18, 0.5))]
  param, intercepts = trace_calibration.lad_fit_terms(
      samples, [i / 100 for i in range(41)])
  assert param == pytest.approx(p_true)
  assert intercepts == {1: pytest.approx(2.0), 2: pytest.approx(1.0)}


def test_fit_block_head_recovers_share_and_start_ups():
  compute = 0.040
  share, startup = 0.45, {1: 0.001, 2: 0.006}

  def head(k, f):
    return startup[k] + compute * (share + (1 - share) * f)

  samples = [(k, f, head(k, f)) for k in (1, 2) for f in (0.0, 0.05, 0.8, 1.0)]
  fitted, startups = trace_calibration.fit_block_head(samples, compute)
  assert fitted == pytest.approx(share)
  assert startups == {1: pytest.approx(0.001), 2: pytest.approx(0.006)}
  # A given share is kept; the start-ups are fitted to it (and never < 0).
  fitted, startups = trace_calibration.fit_block_head(samples, compute,
                                                      share=0.3)
  # head - C (0.3 + 0.7 f) - startup = C (0.15 - 0.15 f): median 0.08625 C.
  assert fitted == 0.3
  assert startups == {1: pytest.approx(0.001 + 0.08625 * compute),
                      2: pytest.approx(0.006 + 0.08625 * compute)}
  _, startups = trace_calibration.fit_block_head(samples, compute, share=0.9)
  assert startups == {1: 0.0, 2: 0.0}  # never below 0
  # Fractions that cannot tell the share apart from the start-up: default.
  same_f = [(1, 1.0, head(1, 1.0)), (2, 1.0, head(2, 1.0))]
  fitted, startups = trace_calibration.fit_block_head(same_f, compute,
                                                 default_share=0.3)
  assert fitted == 0.3
  assert startups == {1: pytest.approx(0.001), 2: pytest.approx(0.006)}
  assert trace_calibration.fit_block_head([], compute, default_share=0.3) == (
      0.3, {})
  # Each later step's early compute is in its K's heads, not its start-up.
  early = 0.002
  with_early = [(k, f, h + early * (k - 1)) for k, f, h in samples]
  fitted, startups = trace_calibration.fit_block_head(with_early, compute,
                                                      early_s=early)
  assert fitted == pytest.approx(share)
  assert startups == {1: pytest.approx(0.001), 2: pytest.approx(0.006)}


def test_traced_over_modelled_takes_the_median_of_a_measure():
  def row(trace_end, model_end, trace_gap=None, model_gap=None):
    trace = {"backward_end_s": trace_end}
    model = {"backward_end_s": model_end}
    if trace_gap is not None:
      trace["step_gap_s"], model["step_gap_s"] = trace_gap, model_gap
    return {"first_step": {"trace": trace, "model": model}}

  rows = [row(0.03, 0.02, 0.010, 0.020), row(0.02, 0.02),
          row(0.01, 0.02, 0.006, 0.020), row(0.02, 0.02, 0.030, 0.0),
          {"first_step": None}, {}]
  assert trace_calibration.traced_over_modelled(rows) == pytest.approx(1.0)
  # Only rows with the gap on both sides and a modelled one above 0.
  assert trace_calibration.traced_over_modelled(
      rows, "step_gap_s") == pytest.approx(0.4)
  assert trace_calibration.traced_over_modelled(rows[1:2],
                                                "step_gap_s") is None


def test_first_step_pairs_keep_the_rows_with_both_sides():
  rows = [{"first_step": {"trace": {"step_gap_s": 0.01},
                          "model": {"step_gap_s": 0.0}}},
          {"first_step": {"trace": None, "model": {"step_gap_s": 0.02}}},
          {"first_step": {"trace": {"step_gap_s": 0.03}, "model": {}}},
          {"first_step": None}, {}]
  # A modelled 0 is kept here (the ratio leaves it out, the difference
  # does not).
  assert trace_calibration.first_step_pairs(rows, "step_gap_s") == [
      (0.01, 0.0)]
  assert trace_calibration.first_step_pairs(rows, "backward_end_s") == []


def test_input_work_per_step_is_the_start_ups_growth_per_later_step():
  # K=2's start-up grows by 1 ms over K=1's, K=4's by 9 ms over 3 later
  # steps, K=8's by 28 ms over 7: 1, 3 and 4 ms a step; their median (the
  # mean would be 2.67 ms).
  assert trace_calibration.input_work_per_step(
      {1: 0.001, 2: 0.002, 4: 0.010, 8: 0.029}) == pytest.approx(0.003)
  assert trace_calibration.input_work_per_step(
      {1: 0.001, 4: 0.010}) == pytest.approx(0.003)
  # A start-up below K=1's is no input work; without K=1 or a larger K
  # there is nothing to compare.
  assert trace_calibration.input_work_per_step({1: 0.004, 2: 0.001}) == 0.0
  assert trace_calibration.input_work_per_step({2: 0.004}) is None
  assert trace_calibration.input_work_per_step({1: 0.004}) is None
  assert trace_calibration.input_work_per_step({}) is None
