// spray-fi-rate: the message rate and streaming bandwidth of any libfabric provider,
// posting sends in bursts with or without FI_MORE on all but the last of each burst.
//
// One process, two domains (each with its own AV, CQ and tagged RDM endpoint): the main
// thread sends, a second thread receives. Separate domains keep the two sides' progress
// apart, as between processes; one process keeps the run self-contained. Messages up to
// the provider's inject size are injected (the buffer is free at once); larger ones go
// from a ring of --window buffers, each reused once its send completed. At most --window
// sends are outstanding (posted, not yet completed). The receiver keeps --window receives
// posted and checks that each message is --bytes long and carries, in its first and (from
// 16 bytes) its last 8 bytes, the value of the sender's count that its receive's place in
// posting order calls for (receives match in posting order, FI_ORDER_SAS; they may
// complete in any order), so the rate is of messages that arrived whole, each once and
// matched in order (the bytes between are not compared: a check of every byte would cost
// the receiver as much as a copy, and bound the rate it measures). Prints one line:
// microseconds a message, messages a second and MB/s (10^6 bytes) as the receiver saw
// them over the last 90 % of the run (the first 10 % warm up). --shared-core puts both
// threads on one CPU, as when processes outnumber cores. --pieces N gives every send and
// receive buffer as N iovecs of about equal length (the v/msg forms: what it costs a
// provider to gather and scatter them). --receive-offset N starts the receive buffers N
// bytes later, which moves each one relative to its send buffer modulo 4 KiB.
//
// Usage: spray-fi-rate [--provider P] [--bytes N] [--burst N] [--more] [--messages N]
//                      [--window N] [--shared-core] [--pieces N] [--receive-offset N]
#include <sched.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "provider/client/rdm_endpoint.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);  // a run that takes longer fails

[[noreturn]] void fail(const std::string& why) {
  throw std::runtime_error(why);
}

void check(int rc, const char* call) {
  if (rc != 0) fail(fmt::format("{} failed: {}", call, fi_strerror(-rc)));
}

// One side: its own domain, AV, CQ and endpoint on `provider`.
class Side {
 public:
  explicit Side(const std::string& provider, size_t cq_entries) {
    spray::fi_client::RdmEndpointSpec spec;
    spec.provider = provider;
    spec.cq_entries = cq_entries;
    std::string error;
    fi_ = spray::fi_client::RdmEndpoint::open(spec, error);
    if (!fi_) fail(error);
  }

  // `other` entered into this side's AV.
  fi_addr_t enter(const Side& other) {
    std::string error;
    const fi_addr_t address = fi_->enter(other.fi_->name(), error);
    if (address == FI_ADDR_NOTAVAIL) fail("fi_av_insert: " + error);
    return address;
  }
  // Completions read now (each entry into `done` when given); an error completion fails
  // the run.
  size_t poll(std::vector<fi_cq_tagged_entry>* done = nullptr) {
    fi_cq_tagged_entry entries[32];
    const ssize_t n = fi_cq_read(fi_->cq(), entries, 32);
    if (n == -FI_EAGAIN) return 0;
    if (n < 0) {
      fi_cq_err_entry err{};
      fi_cq_readerr(fi_->cq(), &err, 0);
      fail(fmt::format("error completion: {}", fi_strerror(err.err)));
    }
    if (done) done->insert(done->end(), entries, entries + n);
    return static_cast<size_t>(n);
  }
  fid_ep* ep() const { return fi_->ep(); }
  size_t inject_size() const { return fi_->info().tx_attr->inject_size; }

 private:
  std::unique_ptr<spray::fi_client::RdmEndpoint> fi_;
};

struct Options {
  std::string provider = "spray";
  size_t bytes = 8;  // per message; at least 8 (the count it carries)
  int burst = 8;
  bool more = false;
  uint64_t messages = 200000;
  size_t window = 256;
  // Both threads on one CPU, as when processes outnumber cores: each side then runs only
  // when the other gives the CPU away or its time slice ends.
  bool shared_core = false;
  int pieces = 1;  // iovecs a send's and a receive's buffer is given as
  // Bytes the receive window starts past where the allocator put it: moves every receive
  // buffer relative to its send buffer, modulo 4 KiB (copies 1-63 bytes ahead of their
  // source are the slow ones: transport/base/copy_bytes.h).
  size_t receive_offset = 0;
};

// A buffer as consecutive iovecs (on the stack: no allocation a message).
struct Pieces {
  std::array<iovec, 4> iov{};
  size_t count = 0;
};

// `bytes` at `base` as `n` (1-4) consecutive iovecs of about equal length (empty ones
// too, when `bytes` < n).
Pieces cut(uint8_t* base, size_t bytes, int n) {
  Pieces out;
  out.count = static_cast<size_t>(n);
  for (size_t i = 0, at = 0; i < out.count; ++i) {
    const size_t end = bytes * (i + 1) / out.count;
    out.iov[i] = {base + at, end - at};
    at = end;
  }
  return out;
}

// Keeps the calling thread, and the threads it starts from now on, on the CPU it runs on.
void pin_to_current_cpu() {
  const int cpu = sched_getcpu();
  if (cpu < 0) fail(fmt::format("sched_getcpu failed: {}", std::strerror(errno)));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    fail(fmt::format("sched_setaffinity to CPU {} failed: {}", cpu, std::strerror(errno)));
  }
}

// Messages received before the rate is timed: the first tenth warms up.
uint64_t warmup_messages(const Options& o) {
  return o.messages / 10;
}

// What the receiving thread reports: `failed` is set (after `error`) when it gave up;
// otherwise the time the warm-up ended and the time the last message arrived.
struct ReceiveOutcome {
  std::string error;
  std::atomic<bool> failed{false};
  Clock::time_point warm;
  Clock::time_point end;
};

// Writes message `count` into `m` (o.bytes long): the count in its first 8 bytes and, from
// 16 bytes, in its last 8.
void stamp(uint8_t* m, size_t bytes, uint64_t count) {
  std::memcpy(m, &count, sizeof count);
  if (bytes >= 2 * sizeof count) std::memcpy(m + bytes - sizeof count, &count, sizeof count);
}

// The count message `m` carries, or ~0 when its two copies differ.
uint64_t message_count(const uint8_t* m, size_t bytes) {
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, m, sizeof head);
  if (bytes < 2 * sizeof head) return head;
  std::memcpy(&tail, m + bytes - sizeof tail, sizeof tail);
  return head == tail ? head : ~uint64_t{0};
}

// Keeps receives of o.bytes posted in the `window` buffers of `slots` until `messages` have
// arrived, each whole and carrying the count its receive's place in posting order calls
// for. `slots` outlives the endpoints: a receive still posted when this gives up may be
// written until the endpoint closes.
void receive(Side& side, const Options& o, std::span<uint8_t> slots, ReceiveOutcome& outcome) {
  try {
    std::vector<uint64_t> expected(o.window);  // the count due in each buffer
    uint64_t posted = 0;
    auto post = [&](size_t buffer) {
      if (posted == o.messages) return;  // enough for every message
      uint8_t* slot = slots.data() + buffer * o.bytes;
      void* context = reinterpret_cast<void*>(buffer);
      if (o.pieces == 1) {
        check(static_cast<int>(
                  fi_trecv(side.ep(), slot, o.bytes, nullptr, FI_ADDR_UNSPEC, 0, 0, context)),
              "fi_trecv");
      } else {
        const Pieces p = cut(slot, o.bytes, o.pieces);
        check(static_cast<int>(fi_trecvv(side.ep(), p.iov.data(), nullptr, p.count, FI_ADDR_UNSPEC,
                                         0, 0, context)),
              "fi_trecvv");
      }
      expected[buffer] = posted++;
    };
    for (size_t i = 0; i < o.window; ++i) post(i);
    std::vector<fi_cq_tagged_entry> done;
    uint64_t arrived = 0;
    const uint64_t warmup = warmup_messages(o);
    const auto deadline = Clock::now() + kTimeout;
    while (arrived < o.messages) {
      if (Clock::now() > deadline) {
        fail(fmt::format("not done within {} s: {} of {} messages arrived", kTimeout.count(),
                         arrived, o.messages));
      }
      done.clear();
      side.poll(&done);
      for (const fi_cq_tagged_entry& e : done) {
        const auto buffer = reinterpret_cast<size_t>(e.op_context);
        const uint64_t due = expected[buffer];
        if (e.len != o.bytes) fail(fmt::format("message {} was {} bytes", due, e.len));
        if (const uint64_t got = message_count(slots.data() + buffer * o.bytes, o.bytes);
            got != due) {
          fail(fmt::format("message {} carried {}: lost, repeated, mismatched or torn", due, got));
        }
        if (++arrived == warmup) outcome.warm = Clock::now();
        post(buffer);
      }
    }
    outcome.end = Clock::now();
  } catch (const std::exception& e) {
    outcome.error = e.what();
    outcome.failed.store(true, std::memory_order_release);
  }
}

int run(const Options& o) {
  // Declared before the endpoints, so that they outlive them: operations still posted
  // when a run fails may use them until the endpoints close.
  std::vector<uint8_t> receive_allocation(o.receive_offset + o.window * o.bytes);
  const std::span<uint8_t> receive_buffers =
      std::span(receive_allocation).subspan(o.receive_offset, o.window * o.bytes);
  std::vector<uint8_t> buffers(o.window * o.bytes, 0x5a);
  if (o.shared_core) pin_to_current_cpu();  // before the receiving thread, which inherits it
  Side sender(o.provider, 2 * o.window);
  Side receiver(o.provider, 2 * o.window);
  const bool inject = o.bytes <= sender.inject_size();
  const fi_addr_t to = sender.enter(receiver);
  receiver.enter(sender);
  ReceiveOutcome received;
  std::thread rx([&] { receive(receiver, o, receive_buffers, received); });

  // Messages too large to inject go from `buffers`; a buffer is free again when its send
  // completed (completions may come in any order). Injected ones all use the first.
  std::vector<uint8_t*> free_buffers;
  for (size_t i = 0; !inject && i < o.window; ++i) free_buffers.push_back(&buffers[i * o.bytes]);
  std::vector<fi_cq_tagged_entry> done;
  auto reap = [&] {
    done.clear();
    sender.poll(&done);
    for (const fi_cq_tagged_entry& e : done) {
      if (!inject) free_buffers.push_back(static_cast<uint8_t*>(e.op_context));
    }
    return done.size();
  };

  uint64_t posted = 0, completed = 0;
  const auto deadline = Clock::now() + kTimeout;
  while (completed < o.messages) {
    if (Clock::now() > deadline || received.failed.load(std::memory_order_acquire)) break;
    const uint64_t burst = std::min<uint64_t>(static_cast<uint64_t>(o.burst), o.messages - posted);
    if (burst > 0 && posted - completed + burst <= o.window) {
      for (uint64_t i = 0; i < burst; ++i) {
        uint8_t* message = buffers.data();
        if (!inject) {
          message = free_buffers.back();
          free_buffers.pop_back();
        }
        stamp(message, o.bytes, posted);
        const Pieces p = cut(message, o.bytes, o.pieces);
        fi_msg_tagged msg{};
        msg.msg_iov = p.iov.data();
        msg.iov_count = p.count;
        msg.addr = to;
        msg.context = message;
        const uint64_t flags =
            (inject ? FI_INJECT : FI_COMPLETION) | (o.more && i + 1 < burst ? FI_MORE : 0);
        ssize_t rc = 0;
        while ((rc = fi_tsendmsg(sender.ep(), &msg, flags)) == -FI_EAGAIN) completed += reap();
        check(static_cast<int>(rc), "fi_tsendmsg");
        ++posted;
      }
    }
    completed += reap();
  }
  rx.join();
  if (received.failed) fail("receiver: " + received.error);
  if (completed < o.messages) {
    fail(fmt::format("not done within {} s: {} of {} sends completed", kTimeout.count(), completed,
                     o.messages));
  }
  const double seconds = std::chrono::duration<double>(received.end - received.warm).count();
  const auto timed = static_cast<double>(o.messages - warmup_messages(o));
  fmt::print("{} {} B{} burst {}{}: {:.2f} us a message, {:.0f} messages/s, {:.1f} MB/s\n",
             o.provider, o.bytes, o.pieces > 1 ? fmt::format(" in {} pieces", o.pieces) : "",
             o.burst, o.more ? " FI_MORE" : "", seconds / timed * 1e6, timed / seconds,
             timed * static_cast<double>(o.bytes) / seconds / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Message rate and streaming bandwidth of a libfabric provider, sends in bursts with or "
      "without FI_MORE"};
  app.add_option("--provider", o.provider, "libfabric provider name");
  app.add_option("--bytes", o.bytes, "bytes a message (injected up to the inject size)")
      ->check(CLI::Range(size_t{8}, size_t{1} << 30));
  app.add_option("--burst", o.burst, "sends posted back to back")->check(CLI::Range(1, 128));
  app.add_flag("--more", o.more, "post all but the last of each burst with FI_MORE");
  app.add_option("--messages", o.messages, "messages in all")->check(CLI::Range(10, 100000000));
  app.add_option("--window", o.window, "sends outstanding at most")->check(CLI::Range(1, 4096));
  app.add_option("--pieces", o.pieces, "iovecs a send and a receive buffer is given as")
      ->check(CLI::Range(1, 4));
  app.add_option("--receive-offset", o.receive_offset,
                 "bytes the receive buffers start past their allocation (0-4095)")
      ->check(CLI::Range(size_t{0}, size_t{4095}));
  app.add_flag("--shared-core", o.shared_core,
               "run the sending and the receiving thread on one CPU (more threads than cores)");
  CLI11_PARSE(app, argc, argv);
  if (static_cast<size_t>(o.burst) > o.window) {
    fmt::print(stderr, "--burst must not exceed --window\n");
    return 2;
  }
  if (o.window * o.bytes > (size_t{1} << 30)) {
    fmt::print(stderr, "--window x --bytes must not exceed 1 GiB (each side keeps a window)\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "spray-fi-rate: {}\n", e.what());
    return 1;
  }
}
