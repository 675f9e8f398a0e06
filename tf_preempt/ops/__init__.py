"""The preemptive scheduler ops (C++, loaded on first use) and their records.

Importing this package never loads `_scheduler_ops.so`; see `scheduler`.
"""

from tf_preempt.ops.records import COLUMNS
from tf_preempt.ops.records import CollectiveRecord
from tf_preempt.ops.records import telemetry_records
from tf_preempt.ops.scheduler import DEFAULT_SCHEDULER
from tf_preempt.ops.scheduler import OpLibrary
from tf_preempt.ops.scheduler import SchedulerOpsUnavailableError
from tf_preempt.ops.scheduler import close
from tf_preempt.ops.scheduler import complete
from tf_preempt.ops.scheduler import configure
from tf_preempt.ops.scheduler import gate
from tf_preempt.ops.scheduler import is_available
from tf_preempt.ops.scheduler import telemetry
