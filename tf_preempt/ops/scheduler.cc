// The framework-free scheduler core; see scheduler.h.

#include "scheduler.h"

#include <algorithm>
#include <chrono>  // NOLINT(build/c++11)
#include <string>
#include <utility>
#include <vector>

namespace tf_preempt {

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PreemptiveScheduler::~PreemptiveScheduler() {
  Shutdown(absl::CancelledError("tf_preempt scheduler destroyed"));
}

absl::Status PreemptiveScheduler::Configure(const std::vector<int64_t>& ids,
                                            const std::vector<int64_t>& bytes,
                                            const Credit& credit,
                                            int64_t telemetry_iterations,
                                            int64_t* generation) {
  if (ids.size() != bytes.size()) {
    return absl::InvalidArgumentError(
        "collective_ids and collective_bytes differ in length: " +
        std::to_string(ids.size()) + " vs " + std::to_string(bytes.size()));
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError("the plan has no collectives");
  }
  std::unordered_map<int64_t, int> position;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!position.emplace(ids[k], static_cast<int>(k)).second) {
      return absl::InvalidArgumentError(
          "collective id " + std::to_string(ids[k]) +
          " appears twice in the plan; ids must be unique per iteration");
    }
    if (bytes[k] < 0) {
      return absl::InvalidArgumentError(
          "collective " + std::to_string(ids[k]) + " has negative size " +
          std::to_string(bytes[k]));
    }
  }
  if (credit.max_collectives < 1) {
    return absl::InvalidArgumentError(
        "max_collectives_in_flight must be >= 1, got " +
        std::to_string(credit.max_collectives));
  }
  if (telemetry_iterations < 1) {
    return absl::InvalidArgumentError(
        "telemetry_iterations must be >= 1, got " +
        std::to_string(telemetry_iterations));
  }

  CallbackList to_run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return shutdown_status_;
    ++generation_;
    FailPendingLocked(
        absl::AbortedError("tf_preempt scheduler plan replaced (generation " +
                           std::to_string(generation_) +
                           ") while this gate was waiting"),
        &to_run);
    for (size_t k = 0; k < in_flight_.size(); ++k) {
      if (!in_flight_[k].empty()) orphans_[ids_[k]] += in_flight_[k].size();
    }
    ids_ = ids;
    bytes_ = bytes;
    position_ = std::move(position);
    credit_ = credit;
    cursor_ = 0;
    iteration_ = 0;
    pending_.assign(ids.size(), {});
    in_flight_.assign(ids.size(), {});
    in_flight_count_ = 0;
    in_flight_bytes_ = 0;
    ring_.assign(telemetry_iterations, IterationRecords());
    *generation = generation_;
  }
  Run(&to_run);
  return absl::OkStatus();
}

uint64_t PreemptiveScheduler::NewTicket() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ticket_++;
}

absl::Status PreemptiveScheduler::Enqueue(int64_t id, int64_t ready_ns,
                                          uint64_t ticket,
                                          ReleaseCallback callback) {
  CallbackList to_run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return shutdown_status_;
    if (generation_ == 0) {
      return absl::FailedPreconditionError(
          "tf_preempt scheduler has no plan; run the configure op "
          "(tf_preempt.ops.configure) on this device first");
    }
    auto it = position_.find(id);
    if (it == position_.end()) {
      return absl::InvalidArgumentError(
          "collective id " + std::to_string(id) +
          " is not in the scheduler's plan (generation " +
          std::to_string(generation_) + ", " + std::to_string(ids_.size()) +
          " collectives)");
    }
    pending_[it->second].push_back(
        Waiter{ticket, ready_ns, std::move(callback)});
    ReleaseLocked(&to_run);
  }
  Run(&to_run);
  return absl::OkStatus();
}

bool PreemptiveScheduler::Cancel(uint64_t ticket, const absl::Status& status) {
  ReleaseCallback callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& queue : pending_) {
      auto it = std::find_if(
          queue.begin(), queue.end(),
          [ticket](const Waiter& w) { return w.ticket == ticket; });
      if (it != queue.end()) {
        callback = std::move(it->callback);
        queue.erase(it);
        break;
      }
    }
  }
  if (!callback) return false;
  callback(status);
  return true;
}

absl::Status PreemptiveScheduler::Complete(int64_t id) {
  CallbackList to_run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A collective released under a replaced plan completes first: it was
    // released before anything of the current plan.
    auto orphan = orphans_.find(id);
    if (orphan != orphans_.end()) {
      if (--orphan->second == 0) orphans_.erase(orphan);
      return absl::OkStatus();
    }
    if (generation_ == 0) {
      return absl::FailedPreconditionError(
          "tf_preempt scheduler has no plan; run the configure op first");
    }
    auto it = position_.find(id);
    if (it == position_.end()) {
      return absl::InvalidArgumentError(
          "completion of collective id " + std::to_string(id) +
          ", which is not in the scheduler's plan");
    }
    const int pos = it->second;
    if (in_flight_[pos].empty()) {
      return absl::FailedPreconditionError(
          "completion of collective id " + std::to_string(id) +
          ", which is not in flight: its gate has not released it");
    }
    const int64_t iteration = in_flight_[pos].front();
    in_flight_[pos].pop_front();
    --in_flight_count_;
    in_flight_bytes_ -= bytes_[pos];
    IterationRecords& slot = ring_[iteration % ring_.size()];
    if (slot.iteration == iteration) slot.records[pos].done_ns = NowNanos();
    ReleaseLocked(&to_run);
  }
  Run(&to_run);
  return absl::OkStatus();
}

void PreemptiveScheduler::Shutdown(const absl::Status& status) {
  CallbackList to_run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    shutdown_status_ = status;
    FailPendingLocked(status, &to_run);
  }
  Run(&to_run);
}

std::vector<CollectiveRecord> PreemptiveScheduler::Telemetry(
    int64_t num_iterations) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const IterationRecords*> slots;
  for (const IterationRecords& slot : ring_) {
    if (slot.iteration >= 0) slots.push_back(&slot);
  }
  std::sort(slots.begin(), slots.end(),
            [](const IterationRecords* a, const IterationRecords* b) {
              return a->iteration < b->iteration;
            });
  if (num_iterations > 0 &&
      slots.size() > static_cast<size_t>(num_iterations)) {
    slots.erase(slots.begin(), slots.end() - num_iterations);
  }
  std::vector<CollectiveRecord> out;
  for (const IterationRecords* slot : slots) {
    for (const CollectiveRecord& r : slot->records) {
      if (r.released_ns >= 0) out.push_back(r);
    }
  }
  return out;
}

std::string PreemptiveScheduler::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t waiting = 0;
  for (const auto& queue : pending_) waiting += queue.size();
  return "PreemptiveScheduler(generation=" + std::to_string(generation_) +
         ", collectives=" + std::to_string(ids_.size()) +
         ", max_bytes=" + std::to_string(credit_.max_bytes) +
         ", max_collectives=" + std::to_string(credit_.max_collectives) +
         ", iteration=" + std::to_string(iteration_) +
         ", next=" + std::to_string(cursor_) +
         ", waiting=" + std::to_string(waiting) +
         ", in_flight=" + std::to_string(in_flight_count_) +
         (shut_down_ ? ", shut down)" : ")");
}

void PreemptiveScheduler::ReleaseLocked(CallbackList* to_run) {
  const int n = static_cast<int>(ids_.size());
  while (n > 0 && !pending_[cursor_].empty()) {
    const int64_t bytes = bytes_[cursor_];
    if (in_flight_count_ >= credit_.max_collectives) break;
    if (credit_.max_bytes > 0 && in_flight_count_ > 0 &&
        in_flight_bytes_ + bytes > credit_.max_bytes) {
      break;
    }
    Waiter waiter = std::move(pending_[cursor_].front());
    pending_[cursor_].pop_front();
    IterationRecords& slot = SlotLocked(iteration_);
    CollectiveRecord& record = slot.records[cursor_];
    record.iteration = iteration_;
    record.id = ids_[cursor_];
    record.bytes = bytes;
    record.ready_ns = waiter.ready_ns;
    record.released_ns = NowNanos();
    record.done_ns = -1;
    in_flight_[cursor_].push_back(iteration_);
    ++in_flight_count_;
    in_flight_bytes_ += bytes;
    to_run->emplace_back(std::move(waiter.callback), absl::OkStatus());
    if (++cursor_ == n) {
      cursor_ = 0;
      ++iteration_;
    }
  }
}

void PreemptiveScheduler::FailPendingLocked(const absl::Status& status,
                                            CallbackList* to_run) {
  for (auto& queue : pending_) {
    for (Waiter& waiter : queue) {
      to_run->emplace_back(std::move(waiter.callback), status);
    }
    queue.clear();
  }
}

PreemptiveScheduler::IterationRecords& PreemptiveScheduler::SlotLocked(
    int64_t iteration) {
  IterationRecords& slot = ring_[iteration % ring_.size()];
  if (slot.iteration != iteration) {
    slot.iteration = iteration;
    slot.records.assign(ids_.size(), CollectiveRecord());
  }
  return slot;
}

void PreemptiveScheduler::Run(CallbackList* callbacks) {
  for (auto& [callback, status] : *callbacks) callback(status);
  callbacks->clear();
}

}  // namespace tf_preempt
