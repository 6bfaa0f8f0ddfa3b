#include "comms/registry.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace ncclwatch {

namespace {
std::atomic<Registry*> g_registry{nullptr};
}  // namespace

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry();  // never destroyed: read by the exit path
    g_registry.store(made, std::memory_order_release);
    return made;
  }();
  return *r;
}

Registry* existing_registry() noexcept { return g_registry.load(std::memory_order_acquire); }

namespace {
bool is_live(const CommEntry& e) { return e.phase != CommPhase::kReleasedAtExit; }
}  // namespace

void Registry::add_comm(const CommEntry& entry) {
  std::lock_guard lock(lock_);
  // A handle NCCL reuses after a destroy we did not see return belongs to the new comm.
  std::erase_if(comms_, [&](const CommEntry& e) { return e.handle == entry.handle && is_live(e); });
  comms_.push_back(entry);
  ++tally_.created;
}

bool Registry::find_comm(uint64_t handle, CommEntry& out) {
  std::lock_guard lock(lock_);
  for (const CommEntry& e : comms_) {
    if (e.handle == handle && is_live(e)) {
      out = e;
      return true;
    }
  }
  return false;
}

bool Registry::set_phase(uint64_t handle, CommPhase phase) {
  std::lock_guard lock(lock_);
  for (CommEntry& e : comms_) {
    if (e.handle == handle && is_live(e)) {
      e.phase = phase;
      return true;
    }
  }
  return false;
}

bool Registry::enter_teardown(uint64_t handle, CommPhase phase, int64_t time_ns) {
  std::lock_guard lock(lock_);
  for (CommEntry& e : comms_) {
    if (e.handle == handle && is_live(e)) {
      e.phase = phase;
      e.teardown_entered_ns = time_ns;
      return true;
    }
  }
  return false;
}

int64_t Registry::take_child_index(uint64_t handle) {
  std::lock_guard lock(lock_);
  for (CommEntry& e : comms_)
    if (e.handle == handle && is_live(e)) return e.children_made++;
  return -1;
}

void Registry::release_comm(uint64_t handle, bool during_exit, trace::Api by) {
  std::lock_guard lock(lock_);
  auto it = std::find_if(comms_.begin(), comms_.end(),
                         [&](const CommEntry& e) { return e.handle == handle && is_live(e); });
  if (it == comms_.end()) return;
  // NCCL frees a communicator's registrations, windows, device comms and redops with it.
  std::erase_if(resources_, [&](const ResourceEntry& r) { return r.comm == handle; });
  if (during_exit) {
    it->phase = CommPhase::kReleasedAtExit;
    it->released_by = by;
  } else {
    comms_.erase(it);
    ++(by == trace::Api::kCommAbort ? tally_.aborted : tally_.destroyed);
  }
}

void Registry::add_resource(const ResourceEntry& entry) {
  std::lock_guard lock(lock_);
  resources_.push_back(entry);
}

bool Registry::release_resource(trace::Api acquired_by, uint64_t handle, uint64_t comm) {
  std::lock_guard lock(lock_);
  auto it = std::find_if(resources_.begin(), resources_.end(), [&](const ResourceEntry& r) {
    return r.acquired_by == acquired_by && r.handle == handle && (comm == 0 || r.comm == 0 || r.comm == comm);
  });
  if (it == resources_.end()) return false;
  resources_.erase(it);
  return true;
}

void Registry::after_fork_in_child() noexcept {
  lock_.reset();
  // A child starts with no communicators: NCCL's state does not survive fork.
  comms_.clear();
  resources_.clear();
  tally_ = {};
}

}  // namespace ncclwatch
