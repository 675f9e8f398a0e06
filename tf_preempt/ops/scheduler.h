// The preemptive scheduler shared by the tf_preempt op kernels.
//
// `PreemptiveScheduler` is the framework-free core: it knows a plan (the
// order of collectives of one iteration, each with a byte size), a credit
// (how many bytes and collectives may be in flight at once) and a ring buffer
// of per-collective timestamps. The TensorFlow side (scheduler_kernels.cc)
// wraps it in a ResourceBase, one per device and shared name, and drives it
// from three kernels:
//
//   Gate      (async)  Enqueue(): the collective's input is ready; the
//                      callback fires when the collective is next in plan
//                      order and the credit allows it.
//   Complete  (sync)   Complete(): the collective finished; return its
//                      credit, which may release the next waiting gates.
//   Configure (sync)   Configure(): (re)set the plan and the credit.
//
// Release order. Every worker releases the collectives in the same global
// order: position 0..n-1 of iteration 0, then 0..n-1 of iteration 1, and so
// on. A gate that becomes ready early waits, without holding a thread, until
// every collective before it in that order has been released. Gates of the
// same id are matched to iterations first come, first served, so a gate of
// iteration i+1 may arrive while iteration i is still running.
//
// Credit. A collective is released only if, after releasing it, at most
// `max_collectives` collectives and at most `max_bytes` bytes are in flight.
// A collective larger than `max_bytes` is released when nothing else is in
// flight, otherwise it could never run. With NCCL the credit must be one
// collective (NCCL launches must not interleave).
//
// Threading. All state is guarded by one mutex. Callbacks are never run with
// the mutex held: they call the executor's `done`, which may schedule more
// ops, and cancellation callbacks take the mutex themselves.
//
// Timestamps are int64 nanoseconds of std::chrono::steady_clock, which on
// Linux is CLOCK_MONOTONIC, the clock of Python's time.monotonic_ns().

#ifndef TF_PREEMPT_OPS_SCHEDULER_H_
#define TF_PREEMPT_OPS_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>  // NOLINT(build/c++11)
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tf_preempt {

// Nanoseconds of the steady clock that all timestamps use.
int64_t NowNanos();

// Number of int64 columns of a telemetry row (see CollectiveRecord).
inline constexpr int kTelemetryColumns = 6;

// The timestamps of one collective in one iteration. `done_ns` is -1 while
// the collective is in flight.
struct CollectiveRecord {
  int64_t iteration = -1;
  int64_t id = -1;
  int64_t bytes = 0;
  int64_t ready_ns = -1;
  int64_t released_ns = -1;
  int64_t done_ns = -1;
};

// How much may be in flight at once. `max_bytes <= 0` means no byte limit.
struct Credit {
  int64_t max_bytes = 0;
  int64_t max_collectives = 1;
};

class PreemptiveScheduler {
 public:
  // Called exactly once per accepted gate: with OK when released, or with
  // the error that ended its wait (cancellation, shutdown, new plan).
  using ReleaseCallback = std::function<void(const absl::Status&)>;

  PreemptiveScheduler() = default;
  ~PreemptiveScheduler();

  PreemptiveScheduler(const PreemptiveScheduler&) = delete;
  PreemptiveScheduler& operator=(const PreemptiveScheduler&) = delete;

  // Sets the plan (`ids[k]` moves `bytes[k]` bytes, in this order), the
  // credit and the number of iterations the telemetry ring keeps. Replaces
  // any previous plan: gates still waiting fail with Aborted, collectives in
  // flight are forgotten (their later Complete() calls are accepted and
  // ignored), the order restarts at iteration 0 and telemetry is cleared.
  // Returns the new plan generation (1, 2, ...) in `*generation`.
  absl::Status Configure(const std::vector<int64_t>& ids,
                         const std::vector<int64_t>& bytes,
                         const Credit& credit, int64_t telemetry_iterations,
                         int64_t* generation);

  // A number to pass to Enqueue() and Cancel(); reserve it before
  // registering a cancellation callback so that the callback can name it.
  uint64_t NewTicket();

  // Queues the gate of collective `id`, ready at `ready_ns`. On OK,
  // `callback` runs exactly once, possibly before Enqueue() returns (on this
  // thread) or later on the thread that frees the credit. On error (unknown
  // id, no plan, shut down) `callback` is never called.
  absl::Status Enqueue(int64_t id, int64_t ready_ns, uint64_t ticket,
                       ReleaseCallback callback);

  // Fails the gate `ticket` with `status` if it is still waiting. Returns
  // whether it was.
  bool Cancel(uint64_t ticket, const absl::Status& status);

  // Marks the oldest in-flight collective `id` done, returns its credit and
  // releases whatever that allows. The done time is taken under the same
  // lock as release times, so [released_ns, done_ns) is exactly the span the
  // collective held its credit.
  absl::Status Complete(int64_t id);

  // Fails every waiting gate with `status`; later Enqueue() calls fail with
  // it too. Idempotent.
  void Shutdown(const absl::Status& status);

  // Records of the last `num_iterations` iterations (all kept ones if <= 0)
  // that have at least one released collective, ordered by iteration and
  // plan position. Collectives not yet released are left out.
  std::vector<CollectiveRecord> Telemetry(int64_t num_iterations) const;

  // For DebugString and tests.
  std::string Summary() const;

 private:
  struct Waiter {
    uint64_t ticket;
    int64_t ready_ns;
    ReleaseCallback callback;
  };
  struct IterationRecords {
    int64_t iteration = -1;
    std::vector<CollectiveRecord> records;  // By plan position.
  };
  using CallbackList = std::vector<std::pair<ReleaseCallback, absl::Status>>;

  // Moves every gate that may go now from `pending_` to in flight, in plan
  // order, and appends its callback to `*to_run`.
  void ReleaseLocked(CallbackList* to_run);
  // Appends every waiting gate to `*to_run` with `status` and empties the
  // queues.
  void FailPendingLocked(const absl::Status& status, CallbackList* to_run);
  IterationRecords& SlotLocked(int64_t iteration);
  static void Run(CallbackList* callbacks);

  mutable std::mutex mu_;
  // The plan.
  std::vector<int64_t> ids_;
  std::vector<int64_t> bytes_;
  std::unordered_map<int64_t, int> position_;  // id -> plan position.
  Credit credit_;
  int64_t generation_ = 0;
  // Next collective to release: plan position and iteration.
  int cursor_ = 0;
  int64_t iteration_ = 0;
  // Gates waiting for release, one FIFO per plan position.
  std::vector<std::deque<Waiter>> pending_;
  // Iterations of the released, not yet completed collectives, by position.
  std::vector<std::deque<int64_t>> in_flight_;
  int64_t in_flight_count_ = 0;
  int64_t in_flight_bytes_ = 0;
  // In-flight collectives of replaced plans: id -> count.
  std::unordered_map<int64_t, int64_t> orphans_;
  // Telemetry ring, slot = iteration % size.
  std::vector<IterationRecords> ring_;
  uint64_t next_ticket_ = 1;
  bool shut_down_ = false;
  absl::Status shutdown_status_;
};

}  // namespace tf_preempt

#endif  // TF_PREEMPT_OPS_SCHEDULER_H_
