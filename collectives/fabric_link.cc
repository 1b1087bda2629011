#include "collectives/fabric_link.h"

#include "collectives/send_drainer.h"

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace spray::coll {
namespace {

constexpr size_t kSlots = 4096;  // requests in flight at once
// How long a wait polls before it yields (SPRAY_COLL_SPIN_US overrides it), and how long
// it polls and yields before it blocks (SPRAY_COLL_YIELD_US); see fabric_link.h.
// No spin by default: where ranks outnumber cores, the rank a wait is for is often the
// one queued behind it on the same core, and every microsecond spun delays it. With 3,
// 4 and 8 ranks on 2 cores, a 4 KiB all-reduce took 11-22 / 16-18 / 76-84 us without
// the spin against 23-27 / 35-38 / 114-163 with 5 us (2026-11-24); with 2 ranks on 2
// cores no difference stood out of the noise in 8 interleaved runs (a yield with nobody
// else to run costs a system call, not a turn).
constexpr auto kDefaultSpin = std::chrono::microseconds(0);
constexpr auto kDefaultYield = std::chrono::microseconds(500);

std::string fi_error(const char* call, int rc) {
  return fmt::format("{} failed: {}", call, fi_strerror(-rc));
}

// libfabric's `tcp` for FI_EP_RDM is ofi_rxm over tcp's connected endpoints: every message
// above rxm's 16 KiB eager limit goes by rendezvous (a request, the receiver's RMA read,
// the data, a completion), each step needing the other rank on a CPU. With passthru, rxm
// hands our calls to tcp's own RDM endpoint, which streams a message after its header
// instead; libfabric offers it only when the caps asked for allow it (ours: tagged
// messages, receives from any source). 4 ranks on this 2-core machine (2026-11-26,
// spray-coll-perf, interleaved runs, one of each with --check): 1 MiB all-reduce
// 1254-1824 us against 2293-3209 (5 rounds of 200 calls), 1 MiB all-to-all 519-567 against
// 971-1490 and 64 MiB all-reduce 179-206 ms against 206-212 (3 runs each).
// rxm reads the variable once, when the process first calls into libfabric: after that,
// setting it changes nothing (a process that used libfabric before opening a
// communicator must set it itself). A value the user set, 0 included, is kept. Like any
// setenv, it assumes no other thread reads the environment at that moment (collective
// libraries on libfabric set provider defaults the same way, never overwriting the
// user's).
void prefer_tcp_passthru(const std::string& provider) {
  if (provider == "tcp") setenv("FI_OFI_RXM_ENABLE_PASSTHRU", "1", 0);
}

}  // namespace

std::unique_ptr<FabricLink> FabricLink::open(const std::string& provider, std::string& error) {
  std::unique_ptr<FabricLink> link(new FabricLink);
  link->provider_ = provider;
  prefer_tcp_passthru(provider);
  fi_client::RdmEndpointSpec spec;
  spec.provider = provider;
  spec.caps = FI_TAGGED;
  spec.mode = FI_CONTEXT | FI_CONTEXT2;
  spec.threading = FI_THREAD_DOMAIN;
  spec.cq_entries = kSlots;
  spec.cq_wait = FI_WAIT_UNSPEC;  // blocks when idle if the provider can; else we yield
  link->fi_ = fi_client::RdmEndpoint::open(spec, error);
  if (!link->fi_) return nullptr;
  link->spin_ = kDefaultSpin;
  link->yield_ = kDefaultYield;
  if (const char* spin = std::getenv("SPRAY_COLL_SPIN_US"); spin && *spin) {
    link->spin_ = std::chrono::microseconds(std::strtol(spin, nullptr, 10));
  }
  if (const char* y = std::getenv("SPRAY_COLL_YIELD_US"); y && *y) {
    link->yield_ = std::chrono::microseconds(std::strtol(y, nullptr, 10));
  }
  link->inject_size_ = link->fi_->info().tx_attr->inject_size;
  if (const char* inj = std::getenv("SPRAY_COLL_INJECT_BYTES"); inj && *inj) {
    link->inject_size_ =
        std::min(link->inject_size_, static_cast<size_t>(std::strtoull(inj, nullptr, 10)));
  }
  link->slots_.resize(kSlots);
  link->free_slots_.reserve(kSlots);
  for (size_t i = kSlots; i-- > 0;) link->free_slots_.push_back(static_cast<uint32_t>(i));
  return link;
}

std::string FabricLink::fabric_name() const {
  if (provider_ != "spray") return provider_;
  const char* datapath = std::getenv("FI_SPRAY_DATAPATH");
  return fmt::format("spray:{}", datapath != nullptr && *datapath != 0 ? datapath : "auto");
}

std::string FabricLink::opened_path() const {
  const fi_info& info = fi_->info();
  const uint32_t protocol = info.ep_attr->protocol;
  return fmt::format("{}, {}", info.fabric_attr->prov_name, fi_tostr(&protocol, FI_TYPE_PROTOCOL));
}

bool FabricLink::progress_due_sends() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock) return false;                 // a caller is in: it progresses the link itself
  if (calls_ != calls_seen_by_drainer_) {  // a caller was in since the last visit: not away
    calls_seen_by_drainer_ = calls_;
    return false;
  }
  if (detached_ == 0) return false;
  progress(0);
  return detached_ > 0;
}

FabricLink::~FabricLink() {
  drainer_.reset();  // stopped first: it polls the CQ closed with fi_
  // What is still due (the last call's injected sends) is given a moment to arrive,
  // as a socket's linger would; a peer that is gone or failed does not hold us here.
  if (fi_ && detached_ > 0 && !failed_send_) {
    try {
      finish_sends_locked(std::chrono::steady_clock::now() + std::chrono::seconds(1));
    } catch (const CollectiveError&) {
      // Reported by no one: the link is going away; its peers see their own errors.
    }
  }
  // Closed here, before the slots: the provider may use their contexts (FI_CONTEXT2)
  // until the endpoint is gone.
  fi_.reset();
}

std::vector<uint8_t> FabricLink::address() const {
  return fi_->name();
}

bool FabricLink::set_peers(const std::vector<std::vector<uint8_t>>& addresses, std::string& error) {
  peers_.assign(addresses.size(), FI_ADDR_NOTAVAIL);
  for (size_t r = 0; r < addresses.size(); ++r) {
    std::string why;
    peers_[r] = fi_->enter(addresses[r], why);
    if (peers_[r] == FI_ADDR_NOTAVAIL) {
      error = fmt::format("the address of rank {}: {}", r, why);
      return false;
    }
  }
  return true;
}

Request FabricLink::take_slot(int peer, bool is_send, uint64_t tag, size_t len) {
  // Slots come back through wait(), or for injected sends at their completion after it:
  // those are awaited here (bounded by the post timeout). More than kSlots posted without
  // waiting is a bug in the algorithm, reported rather than spun on forever.
  const auto deadline = std::chrono::steady_clock::now() + post_timeout_;
  while (free_slots_.empty() && detached_ > 0 && std::chrono::steady_clock::now() < deadline) {
    if (!progress(0)) std::this_thread::yield();
    throw_failed_send();
  }
  if (free_slots_.empty()) {
    throw CollectiveError(
        fmt::format("more than {} requests in flight on '{}'", kSlots, provider_));
  }
  const uint32_t i = free_slots_.back();
  free_slots_.pop_back();
  Slot& s = slots_[i];
  s.done = false;
  s.provider_owns = false;
  s.waited = false;
  s.error = 0;
  s.prov_errno = 0;
  s.peer = peer;
  s.is_send = is_send;
  s.tag = tag;
  s.len = len;
  return i;
}

void FabricLink::release_if_free(Request r) {
  Slot& s = slots_[r];
  if (!s.waited || s.provider_owns) return;
  free_slots_.push_back(r);
}

template <class TryPost>
void FabricLink::post(Slot& s, const char* call, TryPost try_post) {
  // -FI_EAGAIN: the provider's queues are full until completions are read. Reading them
  // usually frees room at once; if a peer died or stalled it may never, so retrying
  // yields the CPU and ends at the post deadline (the wait timeout), never in a hang.
  std::chrono::steady_clock::time_point deadline{};
  for (;;) {
    const ssize_t rc = try_post();
    if (rc == 0) {
      s.provider_owns = true;
      return;
    }
    if (rc != -FI_EAGAIN) fail(s, fi_error(call, static_cast<int>(rc)));
    const bool completions = progress(0);
    throw_failed_send();
    if (completions) continue;
    const auto now = std::chrono::steady_clock::now();
    if (deadline == std::chrono::steady_clock::time_point{}) deadline = now + post_timeout_;
    if (now >= deadline) {
      fail(s, fmt::format("{} kept answering -FI_EAGAIN for {} ms", call, post_timeout_.count()));
    }
    std::this_thread::yield();
  }
}

Request FabricLink::isend(int peer, const void* buf, size_t len, uint64_t tag) {
  std::lock_guard lock(mutex_);
  ++calls_;
  throw_failed_send();
  const Request r = take_slot(peer, true, tag, len);
  const fi_addr_t to = peers_.at(static_cast<size_t>(peer));
  Slot& s = slots_[r];
  if (len <= inject_size_) {
    // Copied by the provider before fi_tsendmsg returns: complete for the caller now.
    iovec iov{const_cast<void*>(buf), len};
    fi_msg_tagged msg{};
    msg.msg_iov = &iov;
    msg.iov_count = 1;
    msg.addr = to;
    msg.tag = tag;
    msg.context = &s.ctx;
    post(s, "fi_tsendmsg(FI_INJECT)", [&] { return fi_tsendmsg(fi_->ep(), &msg, FI_INJECT); });
    s.done = true;
    if (!drainer_) drainer_ = std::make_unique<SendDrainer>(*this);
    return r;
  }
  post(s, "fi_tsend", [&] { return fi_tsend(fi_->ep(), buf, len, nullptr, to, tag, &s.ctx); });
  return r;
}

Request FabricLink::irecv(int peer, void* buf, size_t len, uint64_t tag) {
  std::lock_guard lock(mutex_);
  ++calls_;
  throw_failed_send();
  const Request r = take_slot(peer, false, tag, len);
  post(slots_[r], "fi_trecv", [&] {
    return fi_trecv(fi_->ep(), buf, len, nullptr, FI_ADDR_UNSPEC, tag, 0, &slots_[r].ctx);
  });
  return r;
}

bool FabricLink::progress(int block_ms) {
  fi_cq_tagged_entry e[16];
  ssize_t n = block_ms > 0 && fi_->cq_can_block() ? fi_cq_sread(fi_->cq(), e, 16, nullptr, block_ms)
                                                  : fi_cq_read(fi_->cq(), e, 16);
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(fi_->cq(), &err, 0) == 1) {
      auto* s = static_cast<Slot*>(err.op_context);
      s->done = true;
      s->provider_owns = false;
      s->error = err.err ? err.err : FI_EOTHER;
      s->prov_errno = err.prov_errno;
      s->received = err.len;
      // A failed send breaks the link (its peer is gone or refuses us): thrown by the
      // caller's next call, or by the wait it is in, whatever that waits for (progress
      // may run on the drainer, which cannot throw). Not only when the send is waited
      // for: a rank waiting first on a receive from the same dead peer would otherwise
      // wait out its whole deadline for a failure already known.
      if (s->is_send && !failed_send_) failed_send_ = *s;
      if (s->waited) {  // an injected send the caller is done with
        --detached_;
        release_if_free(static_cast<Request>(s - slots_.data()));
      }
    }
    return true;
  }
  for (ssize_t i = 0; i < n; ++i) {
    auto* s = static_cast<Slot*>(e[i].op_context);
    s->done = true;
    s->provider_owns = false;
    s->received = e[i].len;
    if (s->waited) {  // an injected send's late completion
      --detached_;
      release_if_free(static_cast<Request>(s - slots_.data()));
    }
  }
  return n > 0;
}

void FabricLink::throw_failed_send() const {
  if (failed_send_) fail(*failed_send_, describe_error(*failed_send_));
}

void FabricLink::wait(Request r, std::chrono::steady_clock::time_point deadline) {
  wait_all(std::span<const Request>(&r, 1), deadline);
}

void FabricLink::wait_all(std::span<const Request> rs,
                          std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  ++calls_;
  throw_failed_send();
  // The clock is read once per kPollsPerClockRead polls: at ~37 ns a read (this VM) it
  // cost as much as the rest of an idle poll of a local peer, and the thresholds it
  // serves (a spin of a few us if set, a 500 us yield, a deadline of seconds) do not need more.
  // Once polls block (fi_cq_sread, up to 1 ms each) it is read after every poll again.
  constexpr uint32_t kPollsPerClockRead = 8;
  auto now = std::chrono::steady_clock::now();
  auto last_event = now;
  uint32_t polls = 0;
  size_t next = 0;  // requests before it are complete
  for (;;) {
    while (next < rs.size() && slots_[rs[next]].done) {
      check_completion(slots_[rs[next]]);
      ++next;
    }
    if (next == rs.size()) break;
    if (++polls % kPollsPerClockRead == 0) {
      now = std::chrono::steady_clock::now();
      if (now >= deadline) fail(slots_[rs[next]], "timed out");
    }
    const bool completions = progress(0);
    throw_failed_send();
    if (completions) {
      last_event = now;
    } else if (now - last_event > spin_) {
      // Idle: give the CPU to the other ranks of this machine.
      if (fi_->cq_can_block() && now - last_event > spin_ + yield_) {
        progress(1);
        throw_failed_send();
        polls = kPollsPerClockRead - 1;  // a blocking poll is slow: read the clock next
      } else {
        std::this_thread::yield();
      }
    }
  }
  for (Request r : rs) {
    slots_[r].waited = true;
    if (slots_[r].provider_owns) ++detached_;
    release_if_free(r);
  }
}

void FabricLink::finish_sends(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  ++calls_;
  finish_sends_locked(deadline);
}

void FabricLink::finish_sends_locked(std::chrono::steady_clock::time_point deadline) {
  // Polls and yields like an idle wait_all, then blocks a millisecond at a time.
  const auto start = std::chrono::steady_clock::now();
  throw_failed_send();
  while (detached_ > 0) {
    const bool completions = progress(0);
    throw_failed_send();
    if (completions) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      throw CollectiveError(
          fmt::format("{} injected sends over '{}' were still unfinished at the deadline",
                      detached_, provider_));
    }
    if (fi_->cq_can_block() && now - start > yield_) {
      progress(1);
      throw_failed_send();
    } else {
      std::this_thread::yield();
    }
  }
}

void FabricLink::check_completion(const Slot& s) const {
  // A message longer or shorter than the receive posted for it means the ranks passed
  // different counts or types to the same call: name that, not just the symptom.
  constexpr const char* kDisagree = "do all ranks pass the same count and type to this call?";
  if (s.error == FI_ETRUNC) {
    fail(s, fmt::format("a longer message arrived than expected ({})", kDisagree));
  }
  if (s.error) fail(s, describe_error(s));
  if (!s.is_send && s.received != s.len) {
    fail(s,
         fmt::format("{} bytes arrived where {} were expected ({})", s.received, s.len, kDisagree));
  }
}

std::string FabricLink::describe_error(const Slot& s) const {
  // The fi errno alone can mislead: spray reports a target whose PDC table stayed full
  // as FI_EAGAIN, "Resource temporarily unavailable", after it waited 10 s for room.
  std::string why = fi_strerror(s.error);
  if (s.prov_errno == 0) return why;
  char buf[128] = {};
  const char* cause = fi_cq_strerror(fi_->cq(), s.prov_errno, nullptr, buf, sizeof buf);
  if (cause != nullptr && *cause != '\0' && why != cause) {
    why += fmt::format(" ({}: {})", provider_, cause);
  }
  return why;
}

void FabricLink::fail(const Slot& s, const std::string& why) const {
  throw CollectiveError(fmt::format("{} of {} bytes {} rank {} (tag {:#x}) over '{}': {}",
                                    s.is_send ? "send" : "receive", s.len,
                                    s.is_send ? "to" : "from", s.peer, s.tag, provider_, why));
}

}  // namespace spray::coll
