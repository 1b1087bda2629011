// fid_eq: event queue. Connectionless endpoints raise no connection events, so this
// carries what the application writes (fi_eq_write) and async errors; reads are
// non-blocking or bounded by the caller's timeout.
#include <chrono>
#include <cstring>
#include <thread>

#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

int eq_close(fid* f) {
  delete fid_to<EventQueue>(f);
  return FI_SUCCESS;
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  auto* eq = fid_to<EventQueue>(f);
  if (eq->events.empty()) return -FI_EAGAIN;
  const auto& e = eq->events.front();
  if (len < e.size() - sizeof(uint32_t)) return -FI_ETOOSMALL;
  std::memcpy(event, e.data(), sizeof(uint32_t));
  const size_t n = e.size() - sizeof(uint32_t);
  std::memcpy(buf, e.data() + sizeof(uint32_t), n);
  if (!(flags & FI_PEEK)) eq->events.pop_front();
  return static_cast<ssize_t>(n);
}

ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) {
  return -FI_EAGAIN;
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t) {
  auto* eq = fid_to<EventQueue>(f);
  std::vector<uint8_t> e(sizeof(uint32_t) + len);
  std::memcpy(e.data(), &event, sizeof(uint32_t));
  if (len) std::memcpy(e.data() + sizeof(uint32_t), buf, len);
  eq->events.push_back(std::move(e));
  return static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout_ms,
                 uint64_t flags) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const ssize_t r = eq_read(f, event, buf, len, flags);
    if (r != -FI_EAGAIN) return r;
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return -FI_EAGAIN;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* s = fi_strerror(prov_errno);
  if (buf && len) {
    std::strncpy(buf, s, len - 1);
    buf[len - 1] = '\0';
  }
  return s;
}

fi_ops eq_fi_ops = {
    .size = sizeof(fi_ops),
    .close = eq_close,
    .bind = no_bind,
    .control = no_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_eq eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

}  // namespace

int eq_open(fid_fabric*, fi_eq_attr* attr, fid_eq** out, void* context) {
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) {
    SPRAY_WARN(FI_LOG_EQ, "EQ wait object %d not supported (FI_WAIT_NONE/UNSPEC)\n",
               attr->wait_obj);
    return -FI_ENOSYS;
  }
  auto* eq = new (std::nothrow) EventQueue;
  if (!eq) return -FI_ENOMEM;
  eq->fid.fid.fclass = FI_CLASS_EQ;
  eq->fid.fid.context = context;
  eq->fid.fid.ops = &eq_fi_ops;
  eq->fid.ops = &eq_ops;
  *out = &eq->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
