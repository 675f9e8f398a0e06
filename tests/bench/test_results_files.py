"""Reading a results directory: worker 0's trace names, the heap mode."""

from tf_preempt.bench import results_files
from tf_preempt.testing import bench_records


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


def test_machine_identity_is_the_cpu_cores_and_kernel():
  line = ("vm: AMD EPYC, 2 cores (shared), Linux 6.18.44-fc-v1272, Python "
          "3.11.7, tensorflow-cpu 2.21.0; load average before each run "
          "0.41-3.01; link rate 200mbit; heap tensorflow")
  assert results_files.machine_identity(line) == (
      "AMD EPYC, 2 cores (shared), Linux 6.18.44-fc-v1272")
  # The host name, the versions and the run's load are not the machine.
  assert results_files.machine_identity(
      "other: AMD EPYC, 2 cores (shared), Linux 6.18.44-fc-v1272, Python "
      "3.12.1, tensorflow-cpu 2.22.0") == results_files.machine_identity(line)
  assert results_files.machine_identity(
      line.replace("fc-v1272", "fc-v1252")) != (
          results_files.machine_identity(line))
  # Probes from before they recorded their machine, and made-up lines.
  assert results_files.machine_identity(None) is None
  assert results_files.machine_identity("made up") is None
  assert results_files.benchmark_setup({"machine": line}, {})["machine"] == (
      "AMD EPYC, 2 cores (shared), Linux 6.18.44-fc-v1272")


def test_the_host_s_speed_reading_is_part_of_the_setup():
  line = bench_records.machine_line()
  assert results_files.benchmark_setup(
      {"machine": line}, {}, {"speed_ms_per_matmul": 0.67})[
          "speed_ms_per_matmul"] == 0.67
  # Directories from before bench.py read it.
  assert results_files.benchmark_setup({"machine": line}, {}, {})[
      "speed_ms_per_matmul"] is None
  assert results_files.benchmark_setup({"machine": line}, {})[
      "speed_ms_per_matmul"] is None
