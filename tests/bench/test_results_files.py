"""Reading a results directory: worker 0's trace names."""

from tf_preempt.bench import results_files


def test_trace_names():
  assert results_files.trace_name("pace@2") == "pace_k2.worker-0.json"
  assert results_files.trace_unroll("pace_k2.worker-0.json") == 2
  assert results_files.trace_unroll("tf_packed_k16.worker-1.json") == 16
  assert results_files.trace_unroll("other.json") == 1
