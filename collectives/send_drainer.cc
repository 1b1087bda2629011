#include "collectives/send_drainer.h"

#include <algorithm>
#include <chrono>

#include "collectives/fabric_link.h"

namespace spray::coll {
namespace {

constexpr auto kDuePeriod = std::chrono::milliseconds(1);
constexpr auto kIdlePeriodMax = std::chrono::milliseconds(16);

}  // namespace

SendDrainer::SendDrainer(FabricLink& link) : link_(link), thread_([this] { run(); }) {}

SendDrainer::~SendDrainer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_one();
  thread_.join();
}

void SendDrainer::run() {
  std::chrono::milliseconds period = kDuePeriod;
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    const bool due = link_.progress_due_sends();
    lock.lock();
    period = due ? kDuePeriod : std::min(period * 2, kIdlePeriodMax);
  }
}

}  // namespace spray::coll
