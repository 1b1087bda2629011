// fid_cntr: completion counter. Reading or waiting drives progress of the bound
// endpoints; fi_cntr_wait blocks in slices of at most 1 ms: on every bound endpoint's
// socket at once when the counter has a wait fd (FI_WAIT_FD), else on the first one.
// fi_cntr_read yields the CPU after a run of reads that moved nothing, as fi_cq_read does.
#include <sched.h>

#include <chrono>
#include <thread>

#include "provider/endpoint.h"

namespace spray::fi {
namespace {

uint64_t cntr_read(fid_cntr* f) {
  auto* c = fid_to<Counter>(f);
  uint64_t value = 0;
  bool yield = false;
  {
    std::lock_guard lock(c->domain->mutex);
    yield = c->idle_yield.should_yield(c->progress());
    value = c->value;
  }
  if (yield) sched_yield();  // as fi_cq_read does (idle_yield.h), without the mutex
  return value;
}

uint64_t cntr_readerr(fid_cntr* f) {
  auto* c = fid_to<Counter>(f);
  std::lock_guard lock(c->domain->mutex);
  c->progress();
  return c->errors;
}

// fi_cntr_add/set (value) and fi_cntr_adderr/seterr (errors).
int update(fid_cntr* f, uint64_t Counter::*field, uint64_t v, bool add) {
  auto* c = fid_to<Counter>(f);
  std::lock_guard lock(c->domain->mutex);
  c->*field = add ? c->*field + v : v;
  if (c->wait_fd) c->wait_fd->signal();  // a thread blocked on the fd re-reads
  return FI_SUCCESS;
}
int cntr_add(fid_cntr* f, uint64_t v) {
  return update(f, &Counter::value, v, true);
}
int cntr_set(fid_cntr* f, uint64_t v) {
  return update(f, &Counter::value, v, false);
}
int cntr_adderr(fid_cntr* f, uint64_t v) {
  return update(f, &Counter::errors, v, true);
}
int cntr_seterr(fid_cntr* f, uint64_t v) {
  return update(f, &Counter::errors, v, false);
}

// Returns when the counter reaches `threshold`, an error is counted, or the timeout passes.
int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout_ms) {
  auto* c = fid_to<Counter>(f);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint64_t errors_before = 0;
  {
    std::lock_guard lock(c->domain->mutex);
    errors_before = c->errors;
  }
  for (;;) {
    Endpoint* waiter = nullptr;
    {
      std::lock_guard lock(c->domain->mutex);
      c->progress();
      if (c->value >= threshold) return FI_SUCCESS;
      if (c->errors != errors_before) return -FI_EAVAIL;
      if (!c->endpoints.empty()) waiter = c->endpoints.front();
      if (!ready_to_sleep(c->endpoints, c->wait_fd != nullptr)) continue;
    }
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return -FI_ETIMEDOUT;
    if (wait_for_progress_thread(*c->domain, 1)) {
      // FI_PROGRESS_AUTO: the thread drains the sockets; it tells us when it delivers.
    } else if (c->wait_fd) {
      c->wait_fd->wait(1);
    } else if (waiter) {
      endpoint_wait(*waiter, 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

int cntr_close(fid* f) {
  auto* c = fid_to<Counter>(f);
  {
    std::lock_guard lock(c->domain->mutex);
    if (!c->endpoints.empty() || c->regions > 0) return -FI_EBUSY;
    --c->domain->refs;
  }
  delete c;
  return FI_SUCCESS;
}

int cntr_control(fid* f, int command, void* arg) {
  return wait_fd_control(fid_to<Counter>(f)->wait_fd.get(), command, arg);
}

fi_ops cntr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = cntr_close,
    .bind = no_bind,
    .control = cntr_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_cntr cntr_ops = {
    .size = sizeof(fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

}  // namespace

// Every endpoint of the domain, not only those bound here: a receive counter's wait must
// also move the packets of a sending endpoint the application does not poll meanwhile
// (under the sanitizers a test stalled exactly so, its sender's ACKs unread for 10 s).
bool Counter::progress() {
  return domain_progress(*domain);
}

int Counter::trywait() {
  std::lock_guard lock(domain->mutex);
  progress();
  const bool signal = wait_fd && wait_fd->clear();
  const bool changed = value != value_at_trywait || errors != errors_at_trywait;
  value_at_trywait = value;
  errors_at_trywait = errors;
  if (changed || signal) return -FI_EAGAIN;
  if (!ready_to_block(endpoints)) return -FI_EAGAIN;
  if (wait_fd) arm_for_timers(*wait_fd, endpoints);
  return FI_SUCCESS;
}

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) {
  if (attr) {
    if (attr->events != FI_CNTR_EVENTS_COMP) return -FI_ENOSYS;
    if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
        attr->wait_obj != FI_WAIT_FD) {
      SPRAY_WARN(FI_LOG_CNTR,
                 "counter wait object %d not supported (FI_WAIT_NONE, FI_WAIT_UNSPEC, "
                 "FI_WAIT_FD)\n",
                 attr->wait_obj);
      return -FI_ENOSYS;
    }
  }
  auto* d = fid_to<Domain>(domain);
  auto* c = new (std::nothrow) Counter;
  if (!c) return -FI_ENOMEM;
  c->domain = d;
  c->wait_obj = attr ? attr->wait_obj : FI_WAIT_UNSPEC;
  if (c->wait_obj == FI_WAIT_FD) {
    std::string error;
    if (!(c->wait_fd = WaitFd::open(error))) {
      SPRAY_WARN(FI_LOG_CNTR, "cannot create the counter's wait fd: %s\n", error.c_str());
      delete c;
      return -FI_ENOMEM;
    }
  }
  c->fid.fid.fclass = FI_CLASS_CNTR;
  c->fid.fid.context = context;
  c->fid.fid.ops = &cntr_fi_ops;
  c->fid.ops = &cntr_ops;
  {
    std::lock_guard lock(d->mutex);
    ++d->refs;
  }
  *out = &c->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
