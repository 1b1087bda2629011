// nccl_net_peer: one of two processes talking through the NCCL net plugin the way NCCL's
// proxy thread drives a net plugin: listen, pass the handle to the peer (here through a
// file), connect and accept without blocking, register buffers, then keep a window of
// grouped receives and their sends in flight in both directions, polling test().
//
// Scenarios:
//   exchange   every received buffer must hold exactly the bytes its send carried, its
//              reported size must be the send's, and the receive buffer past that size
//              must be untouched. Groups of 1-8 buffers, sends of a group posted in a
//              random order (the tag picks the buffer), sizes 0 B-512 KiB, zero-byte
//              sends included. Both processes derive the same schedule from --seed.
//   stream     `a` sends --steps messages of --bytes to `b`, 8 in flight as NCCL keeps
//              them; `b` prints the rate (scripts/nccl-net-compare.sh runs it per provider).
//   peer-dies  `b` connects both ways and exits without closing; `a` must see its sends
//              fail with ncclRemoteError (never hang), large ones in test() and small
//              (injected) ones on a later call, and closing its comms must return.
//
// Prints "PASS <me> ..." and exits 0, or names the first mismatch and exits 1.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/nccl/plugin_loader.h"

namespace {

using Clock = std::chrono::steady_clock;
using spray_nccl_test::load_plugin;

constexpr int kMaxRecvs = 8;
constexpr int kWindow = 4;               // grouped receives in flight per direction
constexpr size_t kMaxSize = 512 * 1024;  // largest send
constexpr size_t kSlack = 4096;          // receive capacity beyond the largest send
constexpr size_t kBufferBytes = kMaxSize + kSlack;
constexpr uint8_t kCanary = 0xee;
constexpr auto kTimeout = std::chrono::seconds(60);

const ncclNet_v8_t* net = nullptr;

[[noreturn]] void fail(const std::string& why) {
  fmt::print(stderr, "FAIL {}\n", why);
  std::_Exit(1);
}

void check(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) fail(fmt::format("{} returned {}", call, static_cast<int>(rc)));
}

// The byte at `offset` of buffer `index` of step `step` sent by `sender`.
uint8_t pattern(char sender, int step, int index, size_t offset) {
  return static_cast<uint8_t>(offset * 131 + static_cast<size_t>(step) * 7 +
                              static_cast<size_t>(index) * 29 + static_cast<size_t>(sender));
}

// One grouped receive and the sends that fill it, as both processes derive it.
struct Step {
  int n = 0;
  int sizes[kMaxRecvs]{};
  int tags[kMaxRecvs]{};
  int send_order[kMaxRecvs]{};  // the sender posts buffer send_order[0] first, ...
};

// The schedule of the direction whose sender is `sender`.
std::vector<Step> schedule(uint64_t seed, char sender, int steps) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(sender));
  std::vector<Step> out(static_cast<size_t>(steps));
  for (Step& s : out) {
    s.n = 1 + static_cast<int>(rng() % kMaxRecvs);
    for (int i = 0; i < s.n; ++i) {
      const uint64_t kind = rng() % 8;
      size_t size = kind == 0 ? 0 : kind < 5 ? rng() % 4096 : rng() % (kMaxSize + 1);
      s.sizes[i] = static_cast<int>(size);
      // Distinct within a group, but the same few tags recur from step to step (as NCCL's
      // do): only matching in posting order puts each send into the right step.
      s.tags[i] = static_cast<int>(rng() % 2) * kMaxRecvs + i;
      s.send_order[i] = i;
    }
    std::shuffle(s.send_order, s.send_order + s.n, rng);
  }
  return out;
}

// Writes `bytes` to dir/name atomically (write, then rename).
void publish(const std::filesystem::path& dir, const std::string& name, const void* bytes,
             size_t len) {
  const auto tmp = dir / (name + ".tmp");
  std::ofstream(tmp, std::ios::binary)
      .write(static_cast<const char*>(bytes), static_cast<std::streamsize>(len));
  std::filesystem::rename(tmp, dir / name);
}

std::vector<char> await_file(const std::filesystem::path& path, size_t len) {
  const auto deadline = Clock::now() + kTimeout;
  while (!std::filesystem::exists(path)) {
    if (Clock::now() > deadline)
      fail(fmt::format("no {} after {} s", path.string(), kTimeout.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<char> bytes(len);
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(len));
  return bytes;
}

struct Connection {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<char> peer_handle;  // what the peer's listen() wrote
};

// listen, swap handles with the peer, then connect and accept until both exist.
Connection connect_both_ways(const std::filesystem::path& dir, char me, char other) {
  Connection c;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  check(net->listen(0, handle, &c.listen), "listen");
  publish(dir, std::string(1, me) + ".handle", handle, sizeof handle);
  c.peer_handle = await_file(dir / (std::string(1, other) + ".handle"), sizeof handle);
  const auto deadline = Clock::now() + kTimeout;
  while (!c.send || !c.recv) {
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    if (!c.send) check(net->connect(0, c.peer_handle.data(), &c.send, &dev), "connect");
    if (!c.recv) check(net->accept(c.listen, &c.recv, &dev), "accept");
    if (Clock::now() > deadline) fail("connect/accept did not finish");
  }
  return c;
}

// A direction's step in flight: the grouped receive, or the sends, of one step.
struct Slot {
  int step = -1;
  void* request = nullptr;       // receive side: the grouped receive
  void* sends[kMaxRecvs]{};      // send side: one request per buffer
  int next_to_post = 0;          // send side: buffers posted, in the step's send order
  bool done[kMaxRecvs]{};        // send side: test reported done
  std::vector<uint8_t> buffers;  // kMaxRecvs x kBufferBytes
  void* mhandle = nullptr;
  uint8_t* buffer(int i) { return buffers.data() + static_cast<size_t>(i) * kBufferBytes; }
};

void register_slot(Slot& slot, void* comm) {
  slot.buffers.assign(kMaxRecvs * kBufferBytes, 0);
  check(net->regMr(comm, slot.buffers.data(), slot.buffers.size(), NCCL_PTR_HOST, &slot.mhandle),
        "regMr");
}

void verify(const Step& s, int step, char sender, Slot& slot, const int* sizes) {
  for (int i = 0; i < s.n; ++i) {
    if (sizes[i] != s.sizes[i]) {
      fail(fmt::format("step {} buffer {}: size {} reported, {} sent", step, i, sizes[i],
                       s.sizes[i]));
    }
    const uint8_t* b = slot.buffer(i);
    for (size_t k = 0; k < static_cast<size_t>(s.sizes[i]); ++k) {
      if (b[k] != pattern(sender, step, i, k)) {
        fail(fmt::format("step {} buffer {}: byte {} of {} is wrong", step, i, k, s.sizes[i]));
      }
    }
    for (size_t k = static_cast<size_t>(s.sizes[i]); k < static_cast<size_t>(s.sizes[i]) + kSlack;
         ++k) {
      if (b[k] != kCanary) fail(fmt::format("step {} buffer {}: written past its size", step, i));
    }
  }
}

int run_exchange(const Connection& c, char me, char other, uint64_t seed, int steps) {
  const std::vector<Step> outgoing = schedule(seed, me, steps);
  const std::vector<Step> incoming = schedule(seed, other, steps);
  std::vector<Slot> send_slots(kWindow), recv_slots(kWindow);
  for (Slot& s : send_slots) register_slot(s, c.send);
  for (Slot& s : recv_slots) register_slot(s, c.recv);
  int next_send = 0, next_recv = 0, sent = 0, received = 0;
  int posting = 0;  // the first step whose sends are not all posted
  size_t bytes_received = 0;
  const auto deadline = Clock::now() + 10 * kTimeout;
  while (sent < steps || received < steps) {
    if (Clock::now() > deadline) fail(fmt::format("stuck: sent {} received {}", sent, received));
    // Receives: post the next step into a free slot, test the ones in flight (in order
    // of posting is not required: each slot is tested on its own).
    for (Slot& slot : recv_slots) {
      if (slot.step < 0 && next_recv < steps) {
        const Step& s = incoming[static_cast<size_t>(next_recv)];
        void* data[kMaxRecvs];
        int capacity[kMaxRecvs];
        int tags[kMaxRecvs];
        void* mh[kMaxRecvs];
        for (int i = 0; i < s.n; ++i) {
          std::memset(slot.buffer(i), kCanary, static_cast<size_t>(s.sizes[i]) + kSlack);
          data[i] = slot.buffer(i);
          capacity[i] = s.sizes[i] + static_cast<int>(kSlack);
          tags[i] = s.tags[i];
          mh[i] = slot.mhandle;
        }
        check(net->irecv(c.recv, s.n, data, capacity, tags, mh, &slot.request), "irecv");
        if (slot.request) slot.step = next_recv++;
      }
      if (slot.step >= 0) {
        int done = 0;
        int sizes[kMaxRecvs];
        check(net->test(slot.request, &done, sizes), "test (receive)");
        if (done) {
          const Step& s = incoming[static_cast<size_t>(slot.step)];
          verify(s, slot.step, other, slot, sizes);
          for (int i = 0; i < s.n; ++i) bytes_received += static_cast<size_t>(sizes[i]);
          slot.step = -1;
          ++received;
        }
      }
    }
    // Sends: fill free slots with the next steps, post buffers strictly in step order
    // and in each step's own order (as NCCL does: an isend may be refused for now, and
    // the rest then wait behind it), test those in flight.
    while (next_send < steps && send_slots[static_cast<size_t>(next_send % kWindow)].step < 0) {
      Slot& slot = send_slots[static_cast<size_t>(next_send % kWindow)];
      const Step& s = outgoing[static_cast<size_t>(next_send)];
      for (int i = 0; i < s.n; ++i) {
        for (size_t k = 0; k < static_cast<size_t>(s.sizes[i]); ++k) {
          slot.buffer(i)[k] = pattern(me, next_send, i, k);
        }
        slot.done[i] = false;
      }
      slot.next_to_post = 0;
      slot.step = next_send++;
    }
    while (posting < next_send) {
      Slot& slot = send_slots[static_cast<size_t>(posting % kWindow)];
      const Step& s = outgoing[static_cast<size_t>(posting)];
      while (slot.next_to_post < s.n) {
        const int i = s.send_order[slot.next_to_post];
        check(
            net->isend(c.send, slot.buffer(i), s.sizes[i], s.tags[i], slot.mhandle, &slot.sends[i]),
            "isend");
        if (!slot.sends[i]) break;
        ++slot.next_to_post;
      }
      if (slot.next_to_post < s.n) break;
      ++posting;
    }
    for (Slot& slot : send_slots) {
      if (slot.step < 0) continue;
      const Step& s = outgoing[static_cast<size_t>(slot.step)];
      bool all_done = slot.next_to_post == s.n;
      for (int o = 0; o < slot.next_to_post; ++o) {
        const int i = s.send_order[o];
        if (!slot.done[i]) {
          int done = 0;
          int size = -1;
          check(net->test(slot.sends[i], &done, &size), "test (send)");
          if (done && size != s.sizes[i]) {
            fail(fmt::format("send step {} buffer {}: size {} reported", slot.step, i, size));
          }
          slot.done[i] = done != 0;
        }
        all_done = all_done && slot.done[i];
      }
      if (all_done) {
        slot.step = -1;
        ++sent;
      }
    }
  }
  for (Slot& s : send_slots) check(net->deregMr(c.send, s.mhandle), "deregMr");
  for (Slot& s : recv_slots) check(net->deregMr(c.recv, s.mhandle), "deregMr");
  fmt::print("PASS {}: {} steps each way, {} bytes received\n", me, steps, bytes_received);
  return 0;
}

// `a` sends until a send fails; it must fail with ncclRemoteError, not hang.
// Sends `bytes` at a time on `send` until one fails; it must fail with ncclRemoteError
// and a WARN line, never hang. Large sends fail in test(); small ones are injected
// (reported done at once), so their failure comes from a later isend or test.
void send_until_failure(void* send, std::vector<uint8_t>& buffer, size_t bytes, void* mh) {
  const auto deadline = Clock::now() + kTimeout;
  for (int sends = 0;; ++sends) {
    void* request = nullptr;
    ncclResult_t rc = ncclSuccess;
    while (!request && rc == ncclSuccess) {
      rc = net->isend(send, buffer.data(), static_cast<int>(bytes), 1, mh, &request);
      if (Clock::now() > deadline) fail("isend kept refusing");
    }
    int done = 0;
    while (rc == ncclSuccess && !done && (rc = net->test(request, &done, nullptr)) == ncclSuccess) {
      if (Clock::now() > deadline) fail(fmt::format("send {} to a dead peer still pending", sends));
    }
    if (rc == ncclRemoteError) {
      const std::string why = spray_nccl_test::take_last_warning();
      if (why.empty()) fail("ncclRemoteError without a WARN line saying why");
      fmt::print("{}-byte send {} failed as it should: {}\n", bytes, sends, why);
      return;
    }
    if (rc != ncclSuccess) fail(fmt::format("{} returned, not ncclRemoteError", int(rc)));
    if (Clock::now() > deadline) fail(fmt::format("{} sends to a dead peer succeeded", sends));
  }
}

// `b` connects both ways and is gone without closing anything; `a` sends large messages
// on its connection and small ones on a second connection to b's handle until each
// fails, and closing every comm (one with a receive still posted) must return.
int run_peer_dies(const Connection& c, char me, const std::vector<char>& peer_handle) {
  if (me == 'b') std::_Exit(0);
  void* second = nullptr;
  const auto deadline = Clock::now() + kTimeout;
  while (!second) {
    std::vector<char> handle = peer_handle;
    check(net->connect(0, handle.data(), &second, nullptr), "connect (second)");
    if (Clock::now() > deadline) fail("a second connect did not finish");
  }
  std::vector<uint8_t> buffer(64 * 1024, 1);
  void* mh = nullptr;
  check(net->regMr(c.send, buffer.data(), buffer.size(), NCCL_PTR_HOST, &mh), "regMr");
  std::vector<uint8_t> inbox(4096);
  void* recv_mh = nullptr;
  check(net->regMr(c.recv, inbox.data(), inbox.size(), NCCL_PTR_HOST, &recv_mh), "regMr");
  void* data[1] = {inbox.data()};
  int capacity[1] = {static_cast<int>(inbox.size())};
  int tags[1] = {7};
  void* mhs[1] = {recv_mh};
  void* never = nullptr;
  check(net->irecv(c.recv, 1, data, capacity, tags, mhs, &never), "irecv");
  send_until_failure(c.send, buffer, buffer.size(), mh);
  send_until_failure(second, buffer, 8, mh);
  check(net->deregMr(c.send, mh), "deregMr");
  check(net->closeSend(c.send), "closeSend");
  check(net->closeSend(second), "closeSend (second)");
  check(net->closeRecv(c.recv), "closeRecv (a receive still posted)");
  check(net->deregMr(nullptr, recv_mh), "deregMr");
  check(net->closeListen(c.listen), "closeListen");
  fmt::print("PASS {}: the dead peer's sends failed and every comm closed\n", me);
  return 0;
}

// `a` streams `steps` messages of `bytes` to `b` with NCCL's 8 steps in flight; `b`
// checks each one's size and first byte and prints the rate of the last 90 % (the first
// 10 % warm the path up), then both close.
int run_stream(const Connection& c, char me, int steps, size_t bytes) {
  constexpr int kInFlight = 8;  // NCCL_STEPS
  std::vector<uint8_t> buffers(kInFlight * std::max<size_t>(bytes, 1));
  void* mh = nullptr;
  check(net->regMr(me == 'a' ? c.send : c.recv, buffers.data(), buffers.size(), NCCL_PTR_HOST, &mh),
        "regMr");
  void* requests[kInFlight] = {};
  int posted = 0, finished = 0;
  const int warmup = steps / 10;
  Clock::time_point start = Clock::now();
  const auto deadline = Clock::now() + 10 * kTimeout;
  while (finished < steps) {
    if (Clock::now() > deadline) fail(fmt::format("stream stuck at {} of {}", finished, steps));
    if (posted < steps && posted - finished < kInFlight) {
      const int slot = posted % kInFlight;
      uint8_t* b = buffers.data() + static_cast<size_t>(slot) * bytes;
      const int size = static_cast<int>(bytes);
      if (me == 'a') {
        if (bytes > 0) b[0] = static_cast<uint8_t>(posted);
        check(net->isend(c.send, b, size, 0, mh, &requests[slot]), "isend");
      } else {
        void* data[1] = {b};
        int capacity[1] = {size};
        int tags[1] = {0};
        void* mhs[1] = {mh};
        check(net->irecv(c.recv, 1, data, capacity, tags, mhs, &requests[slot]), "irecv");
      }
      if (requests[slot]) ++posted;
    }
    const int slot = finished % kInFlight;
    if (finished < posted) {
      int done = 0;
      int size = -1;
      check(net->test(requests[slot], &done, &size), "test");
      if (done) {
        const uint8_t* b = buffers.data() + static_cast<size_t>(slot) * bytes;
        if (size != static_cast<int>(bytes) ||
            (me == 'b' && bytes > 0 && b[0] != static_cast<uint8_t>(finished))) {
          fail(
              fmt::format("stream message {}: size {} or its first byte is wrong", finished, size));
        }
        if (++finished == warmup) start = Clock::now();
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto timed = static_cast<double>(steps - warmup);
  if (me == 'b') {
    fmt::print("STREAM {} bytes x {}: {:.1f} MB/s, {:.2f} us a message\n", bytes, steps - warmup,
               timed * static_cast<double>(bytes) / seconds / 1e6, seconds / timed * 1e6);
  }
  check(net->deregMr(nullptr, mh), "deregMr");
  fmt::print("PASS {}: streamed {} messages of {} bytes\n", me, steps, bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one side of a two-process exchange through the NCCL net plugin"};
  std::string me_name, dir, scenario = "exchange";
  uint64_t seed = 1;
  int steps = 300;
  app.add_option("--me", me_name, "a or b")->required()->check(CLI::IsMember({"a", "b"}));
  app.add_option("--dir", dir, "where the two exchange their handles")->required();
  app.add_option("--seed", seed, "schedule seed (the same on both sides)");
  app.add_option("--steps", steps, "grouped receives each way");
  size_t bytes = 1 << 20;
  app.add_option("--bytes", bytes, "stream: bytes a message")->check(CLI::Range(0, 1 << 30));
  app.add_option("--scenario", scenario)->check(CLI::IsMember({"exchange", "peer-dies", "stream"}));
  CLI11_PARSE(app, argc, argv);
  std::string error;
  net = load_plugin(error);
  if (!net) fail("loading the plugin: " + error);
  const char me = me_name[0];
  const char other = me == 'a' ? 'b' : 'a';
  Connection c = connect_both_ways(dir, me, other);
  if (scenario == "peer-dies") return run_peer_dies(c, me, c.peer_handle);
  if (scenario == "stream") {
    run_stream(c, me, steps, bytes);
  } else {
    run_exchange(c, me, other, seed, steps);
  }
  // Both must be done before either closes: the last acknowledgements still travel.
  publish(dir, std::string(1, me) + ".done", "", 0);
  await_file(std::filesystem::path(dir) / (std::string(1, other) + ".done"), 0);
  check(net->closeSend(c.send), "closeSend");
  check(net->closeRecv(c.recv), "closeRecv");
  check(net->closeListen(c.listen), "closeListen");
  return 0;
}
