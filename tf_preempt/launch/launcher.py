"""Runs one command as N TF_CONFIG workers on this machine, optionally over an
emulated network.

This module only composes the others: `ports` (free loopback ports),
`tf_config` (one validated TF_CONFIG per worker), `processes` (start, pin,
wait, kill) and `netem` (namespaces and shaped links). `scripts/launch.py`
is its command line; test helpers that need a local cluster call
`local_worker_specs` + `processes.WorkerGroup` (to keep the workers running
while the test talks to them) or `launch` (run to completion).
"""

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Sequence

from tf_preempt.launch import netem
from tf_preempt.launch import ports
from tf_preempt.launch import processes
from tf_preempt.launch import tf_config

# Inside a fresh namespace every port is free, so emulated workers share one.
EMULATED_PORT = 20000

# How the demo and the benchmarks run each worker: its own core, one
# intra-op thread (so compute does not spill onto the other worker's core).
MEASUREMENT_WORKER = dict(pin_cpus=True, intra_op_threads=1,
                          inter_op_threads=2)


@dataclasses.dataclass
class LaunchResult:
  """The outcome of `launch`.

  Attributes:
    group: per-worker exit codes, logs and stats (see processes.GroupResult).
    addresses: "host:port" of each worker, as in its TF_CONFIG.
    link: the emulated link, or None on plain loopback.
    log_dir: where the workers' logs are.
  """
  group: processes.GroupResult
  addresses: List[str]
  link: Optional[netem.LinkConfig]
  log_dir: str

  @property
  def exit_code(self) -> int:
    return self.group.exit_code


def worker_specs(command: Sequence[str], addresses: Sequence[str], *,
                 pin_cpus: bool = True,
                 intra_op_threads: Optional[int] = None,
                 inter_op_threads: Optional[int] = None,
                 extra_env: Optional[Mapping[str, str]] = None,
                 prefixes: Optional[Sequence[Sequence[str]]] = None
                ) -> List[processes.WorkerSpec]:
  """One WorkerSpec per address: same command, its own TF_CONFIG.

  Args:
    command: argv every worker runs.
    addresses: "host:port" of each worker; worker i gets task index i.
    pin_cpus: pin each worker to its own share of the CPUs, when there are at
      least as many CPUs as workers.
    intra_op_threads: TF_NUM_INTRAOP_THREADS (and OMP_NUM_THREADS), if set.
    inter_op_threads: TF_NUM_INTEROP_THREADS, if set.
    extra_env: more variables for every worker.
    prefixes: per-worker argv prefix (e.g. `ip netns exec`), or None.

  Returns:
    The specs, worker 0 first.

  Raises:
    ValueError: on an empty command, bad addresses or thread counts.
  """
  if not command:
    raise ValueError("no command to run; put it after `--`")
  configs = tf_config.worker_tf_configs(addresses)
  cpus = processes.assign_cpus(len(addresses)) if pin_cpus else None
  common_env: Dict[str, str] = dict(extra_env or {})
  common_env.update(processes.thread_env(intra_op_threads, inter_op_threads))
  specs = []
  for i, config in enumerate(configs):
    env = dict(common_env, TF_CONFIG=config)
    specs.append(processes.WorkerSpec(
        argv=list(command), env=env,
        cpus=cpus[i] if cpus else None,
        prefix=list(prefixes[i]) if prefixes else [],
        name=f"worker-{i}"))
  return specs


def local_worker_specs(command: Sequence[str], num_workers: int,
                       **kwargs) -> List[processes.WorkerSpec]:
  """`worker_specs` on free loopback ports (the common test set-up).

  Args:
    command: argv every worker runs.
    num_workers: how many workers.
    **kwargs: passed to `worker_specs`.

  Returns:
    The specs; `json.loads(spec.env["TF_CONFIG"])` has the addresses.
  """
  return worker_specs(command, ports.loopback_addresses(num_workers),
                      **kwargs)


def launch(command: Sequence[str], num_workers: int, *,
           timeout_s: Optional[float] = None, log_dir: Optional[str] = None,
           link: Optional[netem.LinkConfig] = None, pin_cpus: bool = True,
           intra_op_threads: Optional[int] = None,
           inter_op_threads: Optional[int] = None,
           extra_env: Optional[Mapping[str, str]] = None,
           grace_s: float = 3.0,
           namespace_order: Optional[Sequence[int]] = None) -> LaunchResult:
  """Runs `command` as `num_workers` workers until all exit or one fails.

  Args:
    command: argv every worker runs; each gets its own TF_CONFIG.
    num_workers: how many workers.
    timeout_s: seconds before every worker is killed; None for no limit.
    log_dir: directory for the workers' logs; a temporary one if None.
    link: emulate this network (root only) instead of using loopback: each
      worker runs in its own network namespace with a private address.
    pin_cpus: pin each worker to its own CPU share when there are enough.
    intra_op_threads: TF intra-op threads per worker, if set.
    inter_op_threads: TF inter-op threads per worker, if set.
    extra_env: more environment variables for every worker.
    grace_s: seconds between SIGTERM and SIGKILL when killing workers.
    namespace_order: with `link`, worker i runs in the namespace (and with
      the address) of position `namespace_order[i]`, a permutation of
      0..num_workers-1; None: its own (i). Lets an experiment tell what
      follows a task from what follows its place in the network.

  Returns:
    The result; every worker process and namespace is gone by then.

  Raises:
    ValueError: on bad arguments.
    netem.EmulationUnavailable: if `link` cannot be emulated here.
    cleanup.Interrupted: on SIGINT/SIGTERM, after cleaning up.
  """
  if num_workers < 1:
    raise ValueError(f"num_workers must be >= 1, got {num_workers}")
  order = list(range(num_workers))
  if namespace_order is not None:
    if link is None:
      raise ValueError("namespace_order needs a link (namespaces)")
    if sorted(namespace_order) != order:
      raise ValueError(f"namespace_order must be a permutation of 0.."
                       f"{num_workers - 1}, got {list(namespace_order)}")
    order = list(namespace_order)
  options = dict(pin_cpus=pin_cpus, intra_op_threads=intra_op_threads,
                 inter_op_threads=inter_op_threads, extra_env=extra_env)
  if link is None:
    specs = local_worker_specs(command, num_workers, **options)
    addresses = [_address_of(spec) for spec in specs]
    group = processes.run_workers(specs, timeout_s=timeout_s,
                                  log_dir=log_dir, grace_s=grace_s)
    return LaunchResult(group, addresses, None, _log_dir_of(group))
  # The network is created first and removed last: the workers run inside it.
  with netem.EmulatedNetwork(num_workers, link) as net:
    addresses = [f"{net.addresses[i]}:{EMULATED_PORT}" for i in order]
    specs = worker_specs(
        command, addresses, prefixes=[net.exec_prefix(i) for i in order],
        **options)
    group = processes.run_workers(specs, timeout_s=timeout_s,
                                  log_dir=log_dir, grace_s=grace_s)
  return LaunchResult(group, addresses, link, _log_dir_of(group))


def launch_for_stats(command: Sequence[str], num_workers: int,
                     **kwargs) -> List[Dict]:
  """`launch`es `command` and returns each worker's stats line.

  Args:
    command: argv every worker runs; each prints a JSON stats line last.
    num_workers: how many workers.
    **kwargs: passed to `launch`.

  Returns:
    The last JSON object each worker printed, by worker.

  Raises:
    RuntimeError: if a worker failed or the run timed out, with the failing
      worker's last log lines and where the logs are.
  """
  result = launch(command, num_workers, **kwargs)
  group = result.group
  if not group.ok:
    bad = group.workers[group.failed] if group.failed is not None else None
    tail = bad.tail(20) if bad is not None else "(timed out)"
    raise RuntimeError(f"`{' '.join(command[1:])}` failed (logs in "
                       f"{result.log_dir}):\n{tail}")
  return [w.stats for w in group.workers]


def _address_of(spec: processes.WorkerSpec) -> str:
  config = tf_config.parse_tf_config(spec.env["TF_CONFIG"])
  task = config["task"]
  return config["cluster"][task["type"]][task["index"]]


def _log_dir_of(group: processes.GroupResult) -> str:
  return os.path.dirname(group.workers[0].stdout_path)
