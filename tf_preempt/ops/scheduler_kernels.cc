// Kernels of the tf_preempt scheduler ops (registered in scheduler_ops.cc).
//
// The scheduler of a device is a `SchedulerResource` in the device's resource
// manager. The resource owns a shared_ptr to the core scheduler; waiting
// gates and their cancellation callbacks hold only the core, never the
// resource, so deleting the resource (close op, session close, context reset)
// runs its destructor, which fails the waiting gates with Cancelled instead
// of leaving their `done` callbacks dangling.
//
// The kernels only forward tensors, so the GPU kernels need no CUDA code:
// they are registered for DEVICE_GPU with the small int64 arguments in host
// memory, which compiles and is harmless in a CPU-only build.

#include <memory>
#include <string>
#include <vector>

#include "scheduler.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"

namespace tf_preempt {
namespace {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::CancellationManager;
using ::tensorflow::CancellationToken;
using ::tensorflow::DEVICE_CPU;
using ::tensorflow::DEVICE_GPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::ResourceBase;
using ::tensorflow::ResourceMgr;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;

class SchedulerResource : public ResourceBase {
 public:
  SchedulerResource() : scheduler_(std::make_shared<PreemptiveScheduler>()) {}
  ~SchedulerResource() override {
    scheduler_->Shutdown(absl::CancelledError(
        "tf_preempt scheduler resource destroyed (session closed or "
        "scheduler closed) while a gate was waiting"));
  }

  std::string DebugString() const override { return scheduler_->Summary(); }

  const std::shared_ptr<PreemptiveScheduler>& scheduler() const {
    return scheduler_;
  }

 private:
  std::shared_ptr<PreemptiveScheduler> scheduler_;
};

// Reads the `container` and `shared_name` attrs of every scheduler op.
class SchedulerName {
 public:
  explicit SchedulerName(OpKernelConstruction* ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("container", &container_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shared_name", &shared_name_));
    OP_REQUIRES(ctx, !shared_name_.empty(),
                absl::InvalidArgumentError("shared_name must not be empty"));
  }

  std::string Container(ResourceMgr* rm) const {
    return container_.empty() ? rm->default_container() : container_;
  }
  const std::string& shared_name() const { return shared_name_; }

  // The scheduler of this op's device, which Configure must have created.
  absl::Status Lookup(OpKernelContext* ctx,
                      std::shared_ptr<PreemptiveScheduler>* out) const {
    ResourceMgr* rm = ctx->resource_manager();
    SchedulerResource* resource = nullptr;
    absl::Status status =
        rm->Lookup<SchedulerResource>(Container(rm), shared_name_, &resource);
    if (absl::IsNotFound(status)) {
      return absl::FailedPreconditionError(
          "no tf_preempt scheduler '" + shared_name_ + "' on device " +
          ctx->device()->name() +
          "; run the configure op (tf_preempt.ops.configure) on this device "
          "first");
    }
    if (!status.ok()) return status;
    *out = resource->scheduler();
    resource->Unref();
    return absl::OkStatus();
  }

 private:
  std::string container_;
  std::string shared_name_;
};

absl::Status ScalarInt64(OpKernelContext* ctx, int index, const char* what,
                         int64_t* value) {
  const Tensor& t = ctx->input(index);
  if (!TensorShapeUtils::IsScalar(t.shape())) {
    return absl::InvalidArgumentError(std::string(what) +
                                      " must be a scalar, got shape " +
                                      t.shape().DebugString());
  }
  *value = t.scalar<int64_t>()();
  return absl::OkStatus();
}

class ConfigureOp : public OpKernel {
 public:
  explicit ConfigureOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), name_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& ids = ctx->input(0);
    const Tensor& bytes = ctx->input(1);
    OP_REQUIRES(ctx,
                TensorShapeUtils::IsVector(ids.shape()) &&
                    TensorShapeUtils::IsVector(bytes.shape()),
                absl::InvalidArgumentError(
                    "collective_ids and collective_bytes must be vectors"));
    Credit credit;
    int64_t telemetry_iterations = 0;
    OP_REQUIRES_OK(ctx, ScalarInt64(ctx, 2, "max_bytes_in_flight",
                                    &credit.max_bytes));
    OP_REQUIRES_OK(ctx, ScalarInt64(ctx, 3, "max_collectives_in_flight",
                                    &credit.max_collectives));
    OP_REQUIRES_OK(ctx, ScalarInt64(ctx, 4, "telemetry_iterations",
                                    &telemetry_iterations));
    auto ids_flat = ids.flat<int64_t>();
    auto bytes_flat = bytes.flat<int64_t>();
    std::vector<int64_t> id_vector(ids_flat.data(),
                                   ids_flat.data() + ids_flat.size());
    std::vector<int64_t> byte_vector(bytes_flat.data(),
                                     bytes_flat.data() + bytes_flat.size());

    ResourceMgr* rm = ctx->resource_manager();
    SchedulerResource* resource = nullptr;
    OP_REQUIRES_OK(ctx, rm->LookupOrCreate<SchedulerResource>(
                            name_.Container(rm), name_.shared_name(),
                            &resource, [](SchedulerResource** created) {
                              *created = new SchedulerResource();
                              return absl::OkStatus();
                            }));
    std::shared_ptr<PreemptiveScheduler> scheduler = resource->scheduler();
    resource->Unref();

    int64_t generation = 0;
    OP_REQUIRES_OK(ctx, scheduler->Configure(id_vector, byte_vector, credit,
                                             telemetry_iterations,
                                             &generation));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<int64_t>()() = generation;
  }

 private:
  SchedulerName name_;
};

class GateOp : public AsyncOpKernel {
 public:
  explicit GateOp(OpKernelConstruction* ctx)
      : AsyncOpKernel(ctx), name_(ctx) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int64_t ready_ns = NowNanos();
    int64_t id = 0;
    OP_REQUIRES_OK_ASYNC(ctx, ScalarInt64(ctx, 1, "collective_id", &id), done);
    std::shared_ptr<PreemptiveScheduler> scheduler;
    OP_REQUIRES_OK_ASYNC(ctx, name_.Lookup(ctx, &scheduler), done);

    // Register for cancellation before queueing: the gate may wait forever
    // if a peer dies, and a cancelled step must not leave `done` pending.
    const uint64_t ticket = scheduler->NewTicket();
    CancellationManager* cm = ctx->cancellation_manager();
    CancellationToken token = CancellationManager::kInvalidToken;
    if (cm != nullptr) {
      token = cm->get_cancellation_token();
      const bool registered =
          cm->RegisterCallback(token, [scheduler, ticket]() {
            scheduler->Cancel(ticket,
                              absl::CancelledError(
                                  "tf_preempt gate cancelled while waiting "
                                  "for its turn"));
          });
      if (!registered) {
        ctx->SetStatus(absl::CancelledError(
            "tf_preempt gate: the step was cancelled before the gate ran"));
        done();
        return;
      }
    }

    // Runs exactly once, on this thread or on whichever thread frees the
    // credit. TryDeregisterCallback never blocks: if the cancellation is
    // running concurrently it finds the gate gone and does nothing.
    auto release = [ctx, done, cm, token](const absl::Status& status) {
      if (cm != nullptr) cm->TryDeregisterCallback(token);
      if (status.ok()) {
        ctx->set_output(0, ctx->input(0));
      } else {
        ctx->SetStatus(status);
      }
      done();
    };
    absl::Status status =
        scheduler->Enqueue(id, ready_ns, ticket, std::move(release));
    if (!status.ok()) {
      if (cm != nullptr) cm->TryDeregisterCallback(token);
      ctx->SetStatus(status);
      done();
    }
  }

 private:
  SchedulerName name_;
};

class CompleteOp : public OpKernel {
 public:
  explicit CompleteOp(OpKernelConstruction* ctx) : OpKernel(ctx), name_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    int64_t id = 0;
    OP_REQUIRES_OK(ctx, ScalarInt64(ctx, 1, "collective_id", &id));
    std::shared_ptr<PreemptiveScheduler> scheduler;
    OP_REQUIRES_OK(ctx, name_.Lookup(ctx, &scheduler));
    OP_REQUIRES_OK(ctx, scheduler->Complete(id));
    ctx->set_output(0, ctx->input(0));
  }

 private:
  SchedulerName name_;
};

class TelemetryOp : public OpKernel {
 public:
  explicit TelemetryOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), name_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    int64_t num_iterations = 0;
    OP_REQUIRES_OK(ctx,
                   ScalarInt64(ctx, 0, "num_iterations", &num_iterations));
    std::shared_ptr<PreemptiveScheduler> scheduler;
    OP_REQUIRES_OK(ctx, name_.Lookup(ctx, &scheduler));
    const std::vector<CollectiveRecord> records =
        scheduler->Telemetry(num_iterations);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(
                 0,
                 TensorShape({static_cast<int64_t>(records.size()),
                              kTelemetryColumns}),
                 &out));
    auto matrix = out->matrix<int64_t>();
    for (size_t i = 0; i < records.size(); ++i) {
      const CollectiveRecord& r = records[i];
      matrix(i, 0) = r.iteration;
      matrix(i, 1) = r.id;
      matrix(i, 2) = r.bytes;
      matrix(i, 3) = r.ready_ns;
      matrix(i, 4) = r.released_ns;
      matrix(i, 5) = r.done_ns;
    }
  }

 private:
  SchedulerName name_;
};

class CloseOp : public OpKernel {
 public:
  explicit CloseOp(OpKernelConstruction* ctx) : OpKernel(ctx), name_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    ResourceMgr* rm = ctx->resource_manager();
    const std::string container = name_.Container(rm);
    SchedulerResource* resource = nullptr;
    absl::Status status =
        rm->Lookup<SchedulerResource>(container, name_.shared_name(),
                                      &resource);
    if (absl::IsNotFound(status)) return;
    OP_REQUIRES_OK(ctx, status);
    // Fail the waiting gates now, even if another kernel still holds a
    // reference that delays the destructor.
    resource->scheduler()->Shutdown(absl::CancelledError(
        "tf_preempt scheduler '" + name_.shared_name() +
        "' closed while a gate was waiting"));
    resource->Unref();
    status = rm->Delete<SchedulerResource>(container, name_.shared_name());
    if (!absl::IsNotFound(status)) OP_REQUIRES_OK(ctx, status);
  }

 private:
  SchedulerName name_;
};

// REGISTER_KERNEL_BUILDER needs the builder spelled `Name(...)`.
using ::tensorflow::register_kernel::Name;

REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerConfigure").Device(DEVICE_CPU),
                        ConfigureOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerGate").Device(DEVICE_CPU),
                        GateOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerComplete").Device(DEVICE_CPU),
                        CompleteOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerTelemetry").Device(DEVICE_CPU),
                        TelemetryOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerClose").Device(DEVICE_CPU),
                        CloseOp);

REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerConfigure")
                            .Device(DEVICE_GPU)
                            .HostMemory("collective_ids")
                            .HostMemory("collective_bytes")
                            .HostMemory("max_bytes_in_flight")
                            .HostMemory("max_collectives_in_flight")
                            .HostMemory("telemetry_iterations")
                            .HostMemory("generation"),
                        ConfigureOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerGate")
                            .Device(DEVICE_GPU)
                            .HostMemory("collective_id"),
                        GateOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerComplete")
                            .Device(DEVICE_GPU)
                            .HostMemory("collective_id"),
                        CompleteOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerTelemetry")
                            .Device(DEVICE_GPU)
                            .HostMemory("num_iterations")
                            .HostMemory("records"),
                        TelemetryOp);
REGISTER_KERNEL_BUILDER(Name("PreemptSchedulerClose").Device(DEVICE_GPU),
                        CloseOp);

}  // namespace
}  // namespace tf_preempt
