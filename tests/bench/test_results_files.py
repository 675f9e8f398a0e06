"""Reading a results directory: worker 0's trace names, the heap mode."""

from tf_preempt.bench import results_files


def test_trace_names():
  assert results_files.trace_name("pace@2") == "pace_k2.worker-0.json"
  assert results_files.trace_unroll("pace_k2.worker-0.json") == 2
  assert results_files.trace_unroll("tf_packed_k16.worker-1.json") == 16
  assert results_files.trace_unroll("other.json") == 1


def test_heap_mode_comes_from_the_machine_line():
  assert results_files.heap_mode(
      {"machine": "vm: 2 cores; link rate 2gbit; workers pinned to one core "
                  "each, 1 intra-op thread; heap keep"}) == "keep"
  # Directories from before --heap say nothing: None.
  assert results_files.heap_mode(
      {"machine": "vm: 2 cores; workers pinned to one core each"}) is None
