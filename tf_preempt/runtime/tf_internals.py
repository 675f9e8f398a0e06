"""Every use of TensorFlow's private distribute internals, in one place.

The runtime reuses TensorFlow's own collective machinery rather than copying
it: the `CollectiveAllReduce` cross-device ops (its launchers, key allocator,
locking and gather/broadcast paths), the per-device `CollectiveReplicaLauncher`
that chains collectives through an ordering token, the packing helper
`group_by_size` (so that the stock-equivalent plans pack exactly as stock
does), and the strategy `Extended` classes that the package's strategies
extend. None of these are public API, so they are imported here only, behind a
check of the TensorFlow version they were verified against. Upgrading
TensorFlow means re-reading the TF sources named in each section below and
then widening `SUPPORTED_TF_VERSIONS`.
"""

import collections
import re

import tensorflow as tf

# Major.minor releases whose private internals this module was verified on.
SUPPORTED_TF_VERSIONS = ("2.21",)


class UnsupportedTensorFlowError(ImportError):
  """The installed TensorFlow is not one whose internals the runtime knows."""


def check_tf_version(version=None):
  """Checks that `version` is a TensorFlow release the runtime supports.

  Args:
    version: a TensorFlow version string such as "2.21.0"; defaults to the
      installed `tf.__version__`.

  Returns:
    The supported major.minor string that matched, e.g. "2.21".

  Raises:
    UnsupportedTensorFlowError: if the version is not a supported release.
  """
  version = tf.__version__ if version is None else str(version)
  match = re.match(r"^(\d+)\.(\d+)(\.|$|rc|-)", version)
  major_minor = f"{match.group(1)}.{match.group(2)}" if match else None
  if major_minor not in SUPPORTED_TF_VERSIONS:
    supported = ", ".join(f"{v}.x" for v in SUPPORTED_TF_VERSIONS)
    raise UnsupportedTensorFlowError(
        f"tf_preempt's runtime builds on private TensorFlow distribute "
        f"internals that were verified on TensorFlow {supported} only, but "
        f"TensorFlow {version} is installed. Install a supported release "
        f"(pip install 'tensorflow-cpu>=2.21,<2.22' or "
        f"'tf-preempt[cpu]'); the planner (tf_preempt.plan) works without "
        f"TensorFlow.")
  return major_minor


check_tf_version()

# pylint: disable=g-direct-tensorflow-import,g-import-not-at-top,protected-access,unused-import
# --- tensorflow/python/distribute/cross_device_ops.py, cross_device_utils.py
from tensorflow.python.distribute import collective_util
from tensorflow.python.distribute import cross_device_ops as _cross_device_ops
from tensorflow.python.distribute import cross_device_utils as _cross_device_utils
from tensorflow.python.distribute import reduce_util

CollectiveAllReduce = _cross_device_ops.CollectiveAllReduce
CollectiveKeys = _cross_device_utils.CollectiveKeys
CollectiveReplicaLauncher = _cross_device_utils.CollectiveReplicaLauncher
CommunicationImplementation = collective_util.CommunicationImplementation
CommunicationOptions = collective_util.Options
ReduceOp = reduce_util.ReduceOp
group_by_size = _cross_device_utils.group_by_size
split_by_sparsity = _cross_device_utils.split_by_sparsity
stitch_values = _cross_device_utils.stitch_values

# --- tensorflow/python/distribute/mirrored_strategy.py,
#     collective_all_reduce_strategy.py, distribute_lib.py
from tensorflow.python.distribute import collective_all_reduce_strategy as _mwms
from tensorflow.python.distribute import distribute_lib as _distribute_lib
from tensorflow.python.distribute import mirrored_strategy as _mirrored

MirroredExtended = _mirrored.MirroredExtended
CollectiveAllReduceExtended = _mwms.CollectiveAllReduceExtended
StrategyBase = _distribute_lib.Strategy

# --- collective_all_reduce_strategy.py (_initialize_multi_worker), which
#     turns the coordination service on only if none is configured yet, with
#     the service's default heartbeat timeout (10 s).
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2 as _coordination_config
from tensorflow.python.distribute import multi_worker_util as _multi_worker_util
from tensorflow.python.eager import context as _context
# pylint: enable=g-direct-tensorflow-import,g-import-not-at-top,unused-import

# The jobs MultiWorkerMirroredStrategy puts under the coordination service.
_COORDINATED_JOBS = ("chief", "worker")


def configured_heartbeat_timeout_ms():
  """The coordination service's heartbeat timeout (ms; 0 is its default),
  or None if no coordination service is configured in this process."""
  config = _context.context().coordination_service
  return None if config is None else int(config.heartbeat_timeout_in_ms)


def configure_coordination_service(cluster_resolver, heartbeat_timeout_ms):
  """Configures the coordination service as MultiWorkerMirroredStrategy
  would, but with `heartbeat_timeout_ms`, before the strategy does.

  Returns:
    Whether it was configured here: False when there is no cluster, the
    task is not a chief or worker, or a service is already configured
    (TensorFlow configures it once per process).
  """
  if _context.context().coordination_service is not None:
    return False
  cluster_spec = _multi_worker_util.normalize_cluster_spec(
      cluster_resolver.cluster_spec())
  if (not cluster_spec.jobs or
      cluster_resolver.task_type not in _COORDINATED_JOBS):
    return False
  jobs = [_coordination_config.CoordinatedJob(
      name=job, num_tasks=cluster_spec.num_tasks(job))
          for job in _COORDINATED_JOBS if job in cluster_spec.jobs]
  _context.context().configure_coordination_service(
      service_type="standalone",
      service_leader=_multi_worker_util.coordination_leader(cluster_spec),
      coordinated_jobs=jobs,
      heartbeat_timeout_in_ms=int(heartbeat_timeout_ms))
  return True


def launcher_all_gather(launcher, tensor, options):
  """All-gathers a dense tensor along axis 0 with one replica's launcher.

  Uses the launcher's raw all-gather (no shape negotiation): every replica
  must pass a tensor of the same shape. It takes the launcher's next instance
  key and ordering token, like its all-reduce.

  Args:
    launcher: a `CollectiveReplicaLauncher`.
    tensor: the dense tensor to gather.
    options: a `CommunicationOptions`.

  Returns:
    The gathered tensor, of shape [group_size * d0, ...].
  """
  return launcher._all_gather(tensor, options)


def launcher_device(launcher):
  """Returns the device a `CollectiveReplicaLauncher` launches on."""
  return launcher._device


CollectiveState = collections.namedtuple(
    "CollectiveState", ["devices", "group_size", "options", "collective_keys",
                        "launchers", "canonicalize_devices"])


def cross_device_ops_state(ops_):
  """Returns the `CollectiveState` of a `CollectiveAllReduce` (or subclass)."""
  return CollectiveState(ops_._devices, ops_._group_size, ops_._options,
                         ops_._collective_keys, ops_._launchers,
                         ops_._canonicalize_devices)


def replace_collective_ops(extended, make_ops, communication_options=None):
  """Swaps a mirrored strategy's `CollectiveAllReduce` for another one.

  The strategy has already built its stock `CollectiveAllReduce` (devices,
  group size, key allocator): the replacement is made from the same state, so
  it shares the group key and the instance-key counter and the two can never
  disagree on which collective is which.

  Args:
    extended: a `MirroredExtended` or `CollectiveAllReduceExtended`.
    make_ops: callable(devices, group_size, options, collective_keys) that
      returns the replacement cross-device ops.
    communication_options: optional `CommunicationOptions` merged into the
      strategy's defaults first (`MirroredStrategy` takes none of its own).

  Returns:
    The replacement, or None if the strategy does not use collectives (e.g.
    `MirroredStrategy` over a mix of CPUs and GPUs falls back to
    `ReductionToOneDevice`), in which case it is left unchanged.
  """
  if communication_options is not None:
    extended._communication_options = (
        extended._communication_options.merge(communication_options))
  stock = extended._cross_device_ops
  if not isinstance(stock, CollectiveAllReduce):
    return None
  replacement = make_ops(stock._devices, stock._group_size,
                         extended._communication_options,
                         stock._collective_keys)
  extended._cross_device_ops = replacement
  if isinstance(getattr(extended, "_collective_ops", None),
                CollectiveAllReduce):
    extended._collective_ops = replacement
  return replacement


def extended_worker_info(extended):
  """Returns (num_workers, id_in_cluster) of a mirrored `Extended`."""
  return (getattr(extended, "_num_workers", 1),
          getattr(extended, "_id_in_cluster", 0))


# --- tensorflow/python/distribute/mirrored_run.py, distribute_lib.py
#     (ReplicaContext.all_reduce): the replica context that the strategies
#     run replica functions under (see replica_context.py for why).
# pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
from tensorflow.python.distribute import mirrored_run as _mirrored_run
from tensorflow.python.eager.polymorphic_function import polymorphic_function as _polymorphic_function
# pylint: enable=g-direct-tensorflow-import,g-import-not-at-top

MirroredReplicaContext = _mirrored_run._MirroredReplicaContext


def uses_merge_call(extended):
  """Whether `ReplicaContext.all_reduce` goes through `merge_call`."""
  return extended._use_merge_call()


def batch_reduce_destination(value):
  """The destination stock `ReplicaContext.all_reduce` reduces `value` to."""
  return _distribute_lib._batch_reduce_destination(value)


def replica_ctx_all_reduce(extended, reduce_op, values, options):
  """The all-reduce stock uses where the strategy avoids merge calls."""
  return extended._replica_ctx_all_reduce(reduce_op, values, options)


def replica_id_in_sync_group(replica_context):
  """The replica's id, as the Python int or tensor its context was made with."""
  return replica_context._replica_id_in_sync_group


def is_tf_function(fn):
  """Whether `fn` is a `tf.function` (which `strategy.run` treats apart)."""
  return isinstance(fn, _polymorphic_function.Function)
