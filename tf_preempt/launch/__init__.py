"""Local multi-worker launcher: TF_CONFIG, ports, processes, emulated network.

`launch` runs one command as N TensorFlow workers on this machine;
`scripts/launch.py` is its command line.
"""

from tf_preempt.launch.cleanup import Interrupted
from tf_preempt.launch.launcher import LaunchResult
from tf_preempt.launch.launcher import MEASUREMENT_WORKER
from tf_preempt.launch.launcher import launch
from tf_preempt.launch.launcher import launch_for_stats
from tf_preempt.launch.launcher import local_worker_specs
from tf_preempt.launch.launcher import worker_specs
from tf_preempt.launch.netem import EmulatedNetwork
from tf_preempt.launch.netem import EmulationUnavailable
from tf_preempt.launch.netem import LinkConfig
from tf_preempt.launch.netem import check_available
from tf_preempt.launch.ports import pick_free_ports
from tf_preempt.launch.processes import GroupResult
from tf_preempt.launch.processes import WorkerGroup
from tf_preempt.launch.processes import WorkerResult
from tf_preempt.launch.processes import WorkerSpec
from tf_preempt.launch.processes import run_workers
from tf_preempt.launch.tf_config import build_tf_config
from tf_preempt.launch.tf_config import parse_tf_config
from tf_preempt.launch.tf_config import worker_tf_configs
