// Op registrations and shape functions of the tf_preempt scheduler ops.
// The kernels are in scheduler_kernels.cc.
//
// Every op names its scheduler by `container` and `shared_name`; the
// scheduler lives in the resource manager of the device the op runs on, so
// each device has its own. All ops are stateful: they must run, in the order
// the data path imposes, and must never be folded or deduplicated.

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_preempt {
namespace {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

absl::Status ForwardWithScalarId(InferenceContext* c) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("PreemptSchedulerConfigure")
    .Input("collective_ids: int64")
    .Input("collective_bytes: int64")
    .Input("max_bytes_in_flight: int64")
    .Input("max_collectives_in_flight: int64")
    .Input("telemetry_iterations: int64")
    .Output("generation: int64")
    .Attr("container: string = ''")
    .Attr("shared_name: string = 'tf_preempt_scheduler'")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle ids, bytes, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &ids));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &bytes));
      TF_RETURN_IF_ERROR(c->Merge(ids, bytes, &unused));
      for (int i = 2; i < 5; ++i) {
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
      }
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Creates or resets the device's scheduler with a plan and a credit.

The plan is the order in which the collectives of one iteration are released;
it restarts after the last one. Gates still waiting fail with Aborted; the
order restarts at iteration 0 and telemetry is cleared.

collective_ids: [n] unique ids, in release order.
collective_bytes: [n] bytes each collective moves (used for the credit).
max_bytes_in_flight: byte credit; <= 0 means no byte limit. A collective
  larger than the credit runs when nothing else is in flight.
max_collectives_in_flight: >= 1; must be 1 for NCCL.
telemetry_iterations: number of iterations the telemetry ring keeps.
generation: 1 for the first plan on this scheduler, then 2, 3, ...
)doc");

REGISTER_OP("PreemptSchedulerGate")
    .Input("input: T")
    .Input("collective_id: int64")
    .Output("output: T")
    .Attr("T: type")
    .Attr("container: string = ''")
    .Attr("shared_name: string = 'tf_preempt_scheduler'")
    .SetIsStateful()
    .SetShapeFn(ForwardWithScalarId)
    .Doc(R"doc(
Forwards `input` once collective `collective_id` may start.

The op is asynchronous. It records when `input` became ready, then waits,
without holding a thread, until the collective is the next one in plan
order and the credit allows it. Fails with InvalidArgument if the id is not
in the plan, FailedPrecondition if the scheduler has no plan, Cancelled if
the step is cancelled or the scheduler is closed, Aborted if the plan is
replaced.
)doc");

REGISTER_OP("PreemptSchedulerComplete")
    .Input("input: T")
    .Input("collective_id: int64")
    .Output("output: T")
    .Attr("T: type")
    .Attr("container: string = ''")
    .Attr("shared_name: string = 'tf_preempt_scheduler'")
    .SetIsStateful()
    .SetShapeFn(ForwardWithScalarId)
    .Doc(R"doc(
Forwards `input` (the collective's output) and returns the collective's credit.

Records the end time of the oldest in-flight collective `collective_id` and
releases the gates that the freed credit allows. Fails with
FailedPrecondition if that collective is not in flight.
)doc");

REGISTER_OP("PreemptSchedulerTelemetry")
    .Input("num_iterations: int64")
    .Output("records: int64")
    .Attr("container: string = ''")
    .Attr("shared_name: string = 'tf_preempt_scheduler'")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      c->set_output(0, c->Matrix(InferenceContext::kUnknownDim, 6));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Returns the released collectives of the last iterations.

num_iterations: how many of the kept iterations; <= 0 for all of them.
records: [rows, 6] int64, one row per released collective, ordered by
  iteration then plan position, columns iteration, id, bytes, ready_ns,
  released_ns, done_ns (steady clock nanoseconds, CLOCK_MONOTONIC on Linux;
  done_ns is -1 while in flight).
)doc");

REGISTER_OP("PreemptSchedulerClose")
    .Attr("container: string = ''")
    .Attr("shared_name: string = 'tf_preempt_scheduler'")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs)
    .Doc(R"doc(
Fails every waiting gate with Cancelled and deletes the device's scheduler.

Closing a scheduler that does not exist is not an error.
)doc");

}  // namespace tf_preempt
