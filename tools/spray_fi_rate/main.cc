// spray-fi-rate: the small-message rate of any libfabric provider, posting sends in bursts
// with or without FI_MORE on all but the last of each burst.
//
// One process, two domains (each with its own AV, CQ and tagged RDM endpoint): the main
// thread sends, a second thread receives. Separate domains keep the two sides' progress
// apart, as between processes; one process keeps the run self-contained. Every send is
// injected (the buffer is free at once); at most --window sends are outstanding (posted,
// not yet completed). The receiver keeps --window receives posted and checks that each
// message carries the next value of the sender's count, so the rate is of messages that
// arrived in order and intact. Prints one line: microseconds a message and messages a
// second over the last 90 % of the run (the first 10 % warm up).
//
// Usage: spray-fi-rate [--provider P] [--burst N] [--more] [--messages N] [--window N]
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "provider/client/rdm_endpoint.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(60);  // a run that stalls this long fails

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
  // Completions read now (each entry's op_context into `contexts` when given); an error
  // completion fails the run.
  size_t poll(std::vector<void*>* contexts = nullptr) {
    fi_cq_tagged_entry entries[32];
    const ssize_t n = fi_cq_read(fi_->cq(), entries, 32);
    if (n == -FI_EAGAIN) return 0;
    if (n < 0) {
      fi_cq_err_entry err{};
      fi_cq_readerr(fi_->cq(), &err, 0);
      fail(fmt::format("error completion: {}", fi_strerror(err.err)));
    }
    if (contexts) {
      for (ssize_t i = 0; i < n; ++i) contexts->push_back(entries[i].op_context);
    }
    return static_cast<size_t>(n);
  }
  fid_ep* ep() const { return fi_->ep(); }
  size_t inject_size() const { return fi_->info().tx_attr->inject_size; }

 private:
  std::unique_ptr<spray::fi_client::RdmEndpoint> fi_;
};

struct Options {
  std::string provider = "spray";
  int burst = 8;
  bool more = false;
  uint64_t messages = 200000;
  size_t window = 256;
};

// What the receiving thread reports: `failed` is set (after `error`) when it gave up.
struct ReceiveOutcome {
  std::string error;
  std::atomic<bool> failed{false};
};

// Keeps up to `window` receives of one 8-byte value posted until `messages` have arrived,
// each the next value of the count.
void receive(Side& side, const Options& o, ReceiveOutcome& outcome) {
  try {
    std::vector<uint64_t> slots(o.window);
    uint64_t posted = 0;
    auto post = [&](uint64_t* slot) {
      if (posted == o.messages) return;  // enough for every message
      check(static_cast<int>(
                fi_trecv(side.ep(), slot, sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC, 0, 0, slot)),
            "fi_trecv");
      ++posted;
    };
    for (uint64_t& s : slots) post(&s);
    std::vector<void*> done;
    uint64_t expected = 0;
    const auto deadline = Clock::now() + kTimeout;
    while (expected < o.messages) {
      if (Clock::now() > deadline) fail(fmt::format("stalled at message {}", expected));
      done.clear();
      side.poll(&done);
      for (void* context : done) {
        auto* slot = static_cast<uint64_t*>(context);
        if (*slot != expected) {
          fail(fmt::format("message {} carried {}: lost, repeated or reordered", expected, *slot));
        }
        ++expected;
        post(slot);
      }
    }
  } catch (const std::exception& e) {
    outcome.error = e.what();
    outcome.failed.store(true, std::memory_order_release);
  }
}

int run(const Options& o) {
  Side sender(o.provider, 2 * o.window);
  Side receiver(o.provider, 2 * o.window);
  if (sender.inject_size() < sizeof(uint64_t)) fail("the provider cannot inject 8 bytes");
  const fi_addr_t to = sender.enter(receiver);
  receiver.enter(sender);
  ReceiveOutcome received;
  std::thread rx([&] { receive(receiver, o, received); });

  uint64_t posted = 0, completed = 0;
  const uint64_t warmup = o.messages / 10;
  Clock::time_point start = Clock::now();
  const auto deadline = Clock::now() + kTimeout;
  while (completed < o.messages) {
    if (Clock::now() > deadline || received.failed.load(std::memory_order_acquire)) break;
    const uint64_t burst = std::min<uint64_t>(static_cast<uint64_t>(o.burst), o.messages - posted);
    if (burst > 0 && posted - completed + burst <= o.window) {
      for (uint64_t i = 0; i < burst; ++i) {
        uint64_t value = posted;
        const iovec iov{&value, sizeof value};
        fi_msg_tagged msg{};
        msg.msg_iov = &iov;
        msg.iov_count = 1;
        msg.addr = to;
        const uint64_t flags = FI_INJECT | (o.more && i + 1 < burst ? FI_MORE : 0);
        ssize_t rc = 0;
        while ((rc = fi_tsendmsg(sender.ep(), &msg, flags)) == -FI_EAGAIN) {
          completed += sender.poll();
        }
        check(static_cast<int>(rc), "fi_tsendmsg");
        ++posted;
      }
    }
    const uint64_t before = completed;
    completed += sender.poll();
    if (before < warmup && completed >= warmup) start = Clock::now();
  }
  rx.join();
  if (received.failed) fail("receiver: " + received.error);
  if (completed < o.messages) fail(fmt::format("stalled at {} of {} sends", completed, o.messages));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto timed = static_cast<double>(o.messages - warmup);
  fmt::print("{} burst {}{}: {:.2f} us a message, {:.0f} messages/s\n", o.provider, o.burst,
             o.more ? " FI_MORE" : "", seconds / timed * 1e6, timed / seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "Small-message rate of a libfabric provider, sends in bursts with or without FI_MORE"};
  app.add_option("--provider", o.provider, "libfabric provider name");
  app.add_option("--burst", o.burst, "sends posted back to back")->check(CLI::Range(1, 128));
  app.add_flag("--more", o.more, "post all but the last of each burst with FI_MORE");
  app.add_option("--messages", o.messages, "messages in all")->check(CLI::Range(10, 100000000));
  app.add_option("--window", o.window, "sends outstanding at most")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  if (static_cast<size_t>(o.burst) > o.window) {
    fmt::print(stderr, "--burst must not exceed --window\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "spray-fi-rate: {}\n", e.what());
    return 1;
  }
}
