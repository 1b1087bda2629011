// fid_cq: completion queue. Reading drives progress of the bound endpoints; entries are
// kept in the widest (tagged) form and written in the CQ's format. fi_cq_sread spins
// briefly, then blocks on the datapath in slices of at most 1 ms with the domain lock
// released, so ranks that outnumber cores leave the CPU to each other. fi_cq_read yields
// the CPU after a run of reads that found nothing and moved nothing (idle_yield.h).
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "provider/endpoint.h"

namespace spray::fi {
namespace {

constexpr auto kSpin = std::chrono::microseconds(5);

size_t entry_size(fi_cq_format f) {
  switch (f) {
    case FI_CQ_FORMAT_MSG:
      return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA:
      return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED:
      return sizeof(fi_cq_tagged_entry);
    default:
      return sizeof(fi_cq_entry);
  }
}

void write_entry(const CompletionQueue& cq, const fi_cq_tagged_entry& e, uint8_t* out) {
  switch (cq.format) {
    case FI_CQ_FORMAT_MSG: {
      const fi_cq_msg_entry m{e.op_context, e.flags, e.len};
      std::memcpy(out, &m, sizeof(m));
      return;
    }
    case FI_CQ_FORMAT_DATA: {
      const fi_cq_data_entry d{e.op_context, e.flags, e.len, e.buf, e.data};
      std::memcpy(out, &d, sizeof(d));
      return;
    }
    case FI_CQ_FORMAT_TAGGED:
      std::memcpy(out, &e, sizeof(e));
      return;
    default: {
      const fi_cq_entry c{e.op_context};
      std::memcpy(out, &c, sizeof(c));
      return;
    }
  }
}

// Domain mutex held.
// `busy`: whether the progress it ran moved anything (see IdleYield).
ssize_t read_locked(CompletionQueue& cq, void* buf, size_t count, fi_addr_t* src, bool& busy) {
  busy = cq.progress();
  if (cq.entries.empty()) return -FI_EAGAIN;
  if (cq.entries.front().error) return -FI_EAVAIL;
  auto* out = static_cast<uint8_t*>(buf);
  const size_t size = entry_size(cq.format);
  size_t n = 0;
  while (n < count && !cq.entries.empty() && !cq.entries.front().error) {
    const CqEntry& e = cq.entries.front();
    write_entry(cq, e.entry, out + n * size);
    if (src) src[n] = e.source;
    cq.entries.pop_front();
    ++n;
  }
  return static_cast<ssize_t>(n);
}

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  auto* cq = fid_to<CompletionQueue>(f);
  if (!buf && count > 0) return -FI_EINVAL;
  ssize_t r = 0;
  bool yield = false;
  {
    std::lock_guard lock(cq->domain->mutex);
    bool busy = false;
    r = read_locked(*cq, buf, count, src, busy);
    yield = cq->idle_yield.should_yield(busy || r != -FI_EAGAIN);
  }
  if (yield) sched_yield();  // not holding the mutex: a progress thread may want it
  return r;
}

ssize_t cq_read(fid_cq* f, void* buf, size_t count) {
  return cq_readfrom(f, buf, count, nullptr);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* buf, uint64_t) {
  auto* cq = fid_to<CompletionQueue>(f);
  if (!buf) return -FI_EINVAL;
  std::lock_guard lock(cq->domain->mutex);
  // The next completion must be the error (fi_cq_read said -FI_EAVAIL).
  if (cq->entries.empty() || !cq->entries.front().error) return -FI_EAGAIN;
  // API >= 1.5: the caller's err_data buffer, if any, is kept; we provide no extra data.
  void* err_data = buf->err_data;
  *buf = cq->errors.front();
  buf->err_data = err_data;
  buf->err_data_size = 0;
  cq->errors.pop_front();
  cq->entries.pop_front();
  return 1;
}

ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void*,
                     int timeout_ms) {
  auto* cq = fid_to<CompletionQueue>(f);
  if (cq->wait_obj == FI_WAIT_NONE) return -FI_EINVAL;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    Endpoint* waiter = nullptr;
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(cq->domain->mutex);
      bool busy = false;  // sread has its own spin, then blocks
      const ssize_t r = read_locked(*cq, buf, count, src, busy);
      if (r != -FI_EAGAIN) return r;
      if (cq->signaled) {
        cq->signaled = false;
        return -FI_EAGAIN;
      }
      if (!cq->endpoints.empty()) waiter = cq->endpoints.front();
      if (timeout_ms >= 0 && now >= deadline) return -FI_EAGAIN;
      if (now - start < kSpin) continue;
      if (!ready_to_sleep(cq->endpoints, cq->wait_fd != nullptr)) continue;
    }
    // Block in 1 ms slices (timers need progress), never 0 ms: a remainder below 1 ms
    // rounds up, or a short fi_cq_sread would poll in a busy loop and steal the CPU
    // from the very ranks it waits for (it did: 13x slower with 3 ranks on 2 cores).
    const int slice = 1;
    if (wait_for_progress_thread(*cq->domain, slice)) {
      // FI_PROGRESS_AUTO: the thread drains the sockets; it tells us when it delivers.
    } else if (cq->wait_fd) {
      cq->wait_fd->wait(slice);  // every bound endpoint's socket at once
    } else if (waiter) {
      endpoint_wait(*waiter, slice);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout_ms) {
  return cq_sreadfrom(f, buf, count, nullptr, cond, timeout_ms);
}

int cq_signal(fid_cq* f) {
  auto* cq = fid_to<CompletionQueue>(f);
  std::lock_guard lock(cq->domain->mutex);
  cq->signaled = true;
  if (cq->wait_fd) cq->wait_fd->signal();
  return FI_SUCCESS;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* s = to_string(static_cast<Status>(prov_errno)).data();  // from literals
  if (buf && len) {
    std::strncpy(buf, s, len - 1);
    buf[len - 1] = '\0';
    return buf;
  }
  return s;
}

int cq_close(fid* f) {
  auto* cq = fid_to<CompletionQueue>(f);
  {
    std::lock_guard lock(cq->domain->mutex);
    if (!cq->endpoints.empty()) return -FI_EBUSY;
    --cq->domain->refs;
  }
  delete cq;
  return FI_SUCCESS;
}

int cq_control(fid* f, int command, void* arg) {
  return wait_fd_control(fid_to<CompletionQueue>(f)->wait_fd.get(), command, arg);
}

fi_ops cq_fi_ops = {
    .size = sizeof(fi_ops),
    .close = cq_close,
    .bind = no_bind,
    .control = cq_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_cq cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

}  // namespace

// Every endpoint of the domain (see Counter::progress): manual progress is the domain's.
bool CompletionQueue::progress() {
  return domain_progress(*domain);
}

int CompletionQueue::trywait() {
  std::lock_guard lock(domain->mutex);
  progress();
  const bool signal = wait_fd && wait_fd->clear();
  if (!entries.empty() || !errors.empty() || signal) return -FI_EAGAIN;
  if (!ready_to_block(endpoints)) return -FI_EAGAIN;
  if (wait_fd) arm_for_timers(*wait_fd, endpoints);
  return FI_SUCCESS;
}

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) {
  if (!attr) return -FI_EINVAL;
  if (attr->format > FI_CQ_FORMAT_TAGGED) return -FI_ENOSYS;
  if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
      attr->wait_obj != FI_WAIT_FD) {
    SPRAY_WARN(FI_LOG_CQ,
               "CQ wait object %d not supported (FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD)\n",
               attr->wait_obj);
    return -FI_ENOSYS;
  }
  if (attr->flags & FI_AFFINITY) return -FI_ENOSYS;
  auto* d = fid_to<Domain>(domain);
  auto* cq = new (std::nothrow) CompletionQueue;
  if (!cq) return -FI_ENOMEM;
  cq->domain = d;
  cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
  cq->wait_obj = attr->wait_obj;
  if (attr->wait_obj == FI_WAIT_FD) {
    std::string error;
    if (!(cq->wait_fd = WaitFd::open(error))) {
      SPRAY_WARN(FI_LOG_CQ, "cannot create the CQ's wait fd: %s\n", error.c_str());
      delete cq;
      return -FI_ENOMEM;
    }
  }
  cq->fid.fid.fclass = FI_CLASS_CQ;
  cq->fid.fid.context = context;
  cq->fid.fid.ops = &cq_fi_ops;
  cq->fid.ops = &cq_ops;
  {
    std::lock_guard lock(d->mutex);
    ++d->refs;
  }
  *out = &cq->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
