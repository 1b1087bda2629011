// The shared-memory datapath: configuration errors, packets crossing without copies and
// their buffers coming home, full rings, unreachable and corrupt peers, peers that die
// (real child processes), the sleep/doorbell handshake, and whole engines over it.
#include "transport/datapath/shm/shm_datapath.h"
#include "transport/datapath/shm/short_distance_reads.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <set>
#include <thread>
#include <vector>

#include "tests/support/mapped_shm_region.h"
#include "tests/support/packet_burst.h"
#include "tests/support/real_time_transfer.h"
#include "transport/datapath/shm/shm_layout.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

std::unique_ptr<ShmDatapath> open_ok(ShmConfig c = {}) {
  std::string error;
  auto d = ShmDatapath::open(c, error);
  EXPECT_TRUE(d) << error;
  return d;
}

using test::receive;

// Both ends of a pipe, closed however the test ends.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fd), 0); }
  ~Pipe() {
    for (int f : fd) ::close(f);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void signal() { (void)!::write(fd[1], "x", 1); }
  void await() {
    char byte;
    (void)!::read(fd[0], &byte, 1);
  }
};

// What a child that offers memory for reading tells its parent: its endpoint's address
// and where the memory is in its process. Sent through a Pipe by offer_source, read back
// by await_source (false when the child did not say).
struct OfferedSource {
  NetAddr addr;
  uint64_t where = 0;
};
void offer_source(Pipe& p, const OfferedSource& s) {
  (void)!::write(p.fd[1], &s.addr, sizeof(s.addr));
  (void)!::write(p.fd[1], &s.where, sizeof(s.where));
}
bool await_source(Pipe& p, OfferedSource& s) {
  return ::read(p.fd[0], &s.addr, sizeof(s.addr)) == static_cast<ssize_t>(sizeof(s.addr)) &&
         ::read(p.fd[0], &s.where, sizeof(s.where)) == static_cast<ssize_t>(sizeof(s.where));
}

// A forked child, killed and reaped if the test ends before it exits: a failed
// assertion must not leave it blocked (holding ctest's output pipe open).
struct Child {
  pid_t pid = -1;
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  bool reap() {
    int status = 0;
    const bool ok = ::waitpid(pid, &status, 0) == pid;
    pid = -1;
    return ok;
  }
};

TEST(ShmDatapath, open__reports_a_port_in_use_an_address_not_local_and_bad_geometry) {
  auto a = open_ok();
  ASSERT_TRUE(a);
  std::string error;
  ShmConfig same;
  same.port = a->local_address().port;
  EXPECT_FALSE(ShmDatapath::open(same, error));
  EXPECT_NE(error.find("already in use"), std::string::npos) << error;
  ShmConfig remote;
  remote.address = "192.0.2.1";  // TEST-NET-1
  EXPECT_FALSE(ShmDatapath::open(remote, error));
  EXPECT_NE(error.find("not an address of this host"), std::string::npos) << error;
  ShmConfig odd;
  odd.ring_entries = 100;
  EXPECT_FALSE(ShmDatapath::open(odd, error));
  EXPECT_NE(error.find("power of two"), std::string::npos) << error;
}

TEST(ShmDatapath, burst__arrives_in_order_with_its_bytes_source_and_entropy) {
  auto a = open_ok(), b = open_ok();
  ASSERT_TRUE(a && b);
  std::vector<PacketBuf*> burst(100);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 1000));
  a->tx_burst(burst.data(), burst.size());
  const auto got = receive(*b, 100);
  ASSERT_EQ(got.size(), 100u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i]->len, 1000u);
    EXPECT_EQ(got[i]->peer, a->local_address());
    EXPECT_EQ(got[i]->entropy, i);
    for (uint32_t k = 0; k < got[i]->len; ++k) ASSERT_EQ(got[i]->data[k], static_cast<uint8_t>(i));
  }
  EXPECT_EQ(b->stats().rx_packets, 100u);
  b->free(const_cast<PacketBuf**>(got.data()), got.size());
}

TEST(ShmDatapath, buffers__come_home_when_the_receiver_frees_them) {
  ShmConfig c;
  c.buffers = 64;
  auto a = open_ok(c), b = open_ok();
  ASSERT_TRUE(a && b);
  for (int round = 0; round < 5; ++round) {
    std::vector<PacketBuf*> burst(64);
    ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 64)) << round;
    PacketBuf* extra = nullptr;
    EXPECT_EQ(a->alloc(&extra, 1), 0u);  // all 64 are out
    a->tx_burst(burst.data(), burst.size());
    auto got = receive(*b, 64);
    ASSERT_EQ(got.size(), 64u);
    EXPECT_EQ(a->alloc(&extra, 1), 0u);  // still held by the receiver
    b->free(got.data(), got.size());
  }
}

// Buffers a receiver returned are used again before fresh ones, so a steady exchange
// keeps a hot set (ShmDatapath::kReclaimAtLent) instead of walking through all 1024
// (17 MB), each first use a page fault on both sides.
TEST(ShmDatapath, returned_buffers__are_used_again_before_fresh_ones) {
  auto a = open_ok(), b = open_ok();
  ASSERT_TRUE(a && b);
  std::set<const uint8_t*> used;
  for (int i = 0; i < 2000; ++i) {
    PacketBuf* p = nullptr;
    ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, {&p, 1}, b->local_address(), 64)) << i;
    used.insert(p->data);
    a->tx_burst(&p, 1);
    auto got = receive(*b, 1);
    ASSERT_EQ(got.size(), 1u) << i;
    b->free(got.data(), got.size());
  }
  EXPECT_LE(used.size(), ShmDatapath::kReclaimAtLent + 1);
}

TEST(ShmDatapath, full_ring__drops_like_a_full_queue_and_recovers) {
  ShmConfig rx;
  rx.ring_entries = 16;
  auto a = open_ok(), b = open_ok(rx);
  ASSERT_TRUE(a && b);
  std::vector<PacketBuf*> burst(40);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 100));
  a->tx_burst(burst.data(), burst.size());
  EXPECT_EQ(a->stats().tx_packets, 16u);
  EXPECT_EQ(a->stats().tx_dropped, 24u);
  auto got = receive(*b, 16);
  EXPECT_EQ(got.size(), 16u);
  PacketBuf* extra = nullptr;
  EXPECT_EQ(b->rx_burst(&extra, 1), 0u);  // the 24 dropped are not there
  b->free(got.data(), got.size());
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 100));
  a->tx_burst(burst.data(), 10);
  a->free(burst.data() + 10, 30);
  got = receive(*b, 10);
  EXPECT_EQ(got.size(), 10u);
  b->free(got.data(), got.size());
}

TEST(ShmDatapath, unreachable_peer__is_counted_and_loses_no_buffer) {
  ShmConfig c;
  c.buffers = 8;
  auto a = open_ok(c);
  ASSERT_TRUE(a);
  NetAddr nobody = a->local_address();
  nobody.port = static_cast<uint16_t>(nobody.port ^ 0x4000);  // no endpoint there
  for (int round = 0; round < 3; ++round) {
    std::vector<PacketBuf*> burst(8);
    ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, nobody, 100));
    a->tx_burst(burst.data(), burst.size());
  }
  EXPECT_EQ(a->stats().tx_unreachable, 24u);
  EXPECT_EQ(a->stats().tx_packets, 0u);
}

using test::MappedRegion;

TEST(ShmDatapath, corrupt_descriptor__is_counted_and_skipped) {
  auto a = open_ok(), b = open_ok();
  ASSERT_TRUE(a && b);
  std::vector<PacketBuf*> burst(3);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 100));
  a->tx_burst(burst.data(), burst.size());
  // Reach into b's inbox as a broken sender would: a buffer index and a length outside
  // a's region.
  MappedRegion inbox(b->local_address());
  ASSERT_NE(inbox.base, nullptr);
  shm::Descriptor* ring = shm::ring_of(inbox.layout.slot(inbox.base, 0));
  ring[0].buffer = 0xfffffff0;
  ring[2].len = 1u << 30;
  const auto got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  PacketBuf* extra = nullptr;
  EXPECT_EQ(b->rx_burst(&extra, 1), 0u);  // both bad descriptors were consumed, not kept
  EXPECT_EQ(got[0]->entropy, 1);
  EXPECT_EQ(b->stats().rx_malformed, 2u);
  b->free(const_cast<PacketBuf**>(got.data()), got.size());
}

// A sender that names itself, in its slot and in its own region's header alike, in a
// form no endpoint's name has (a queue pair number, IPv4 address bytes past the fourth)
// still names its region file, but its packets are not taken under that name: they
// would seem to come from a peer that does not exist, unequal to the sender's real name
// (fuzz_shm found it). They wait until the sender names itself as endpoints do.
TEST(ShmDatapath, sender__naming_itself_in_a_foreign_form_is_not_read) {
  auto a = open_ok(), b = open_ok();
  ASSERT_TRUE(a && b);
  std::vector<PacketBuf*> burst(1);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 100));
  a->tx_burst(burst.data(), burst.size());
  MappedRegion inbox(b->local_address()), own(a->local_address());
  ASSERT_TRUE(inbox.base && own.base);
  shm::SlotControl* slot = inbox.layout.slot(inbox.base, 0);
  NetAddr& owner = shm::header_of(own.base)->owner;
  ASSERT_EQ(slot->sender, a->local_address());
  PacketBuf* got = nullptr;
  for (const auto corrupt : {+[](NetAddr& n) { n.qpn = 7; }, +[](NetAddr& n) { n.ip[9] = 1; }}) {
    corrupt(slot->sender);
    corrupt(owner);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(b->rx_burst(&got, 1), 0u);
    slot->sender = owner = a->local_address();
  }
  ASSERT_EQ(b->rx_burst(&got, 1), 1u);
  EXPECT_EQ(got->peer, a->local_address());
  b->free(&got, 1);
}

// Forks `child`: it opens an endpoint, tells us its address, runs `body` and exits.
// Returns that address.
template <class Body>
NetAddr spawn_endpoint(Child& child, Body body) {
  Pipe info;
  child.pid = ::fork();
  if (child.pid == 0) {
    std::string error;
    auto d = ShmDatapath::open(ShmConfig{}, error);
    NetAddr addr = d ? d->local_address() : NetAddr{};
    (void)!::write(info.fd[1], &addr, sizeof(addr));
    if (d) body(*d);
    d.reset();  // a clean close: the region's name goes, mappings of it stay valid
    ::_exit(0);
  }
  NetAddr addr;
  EXPECT_EQ(::read(info.fd[0], &addr, sizeof(addr)), static_cast<ssize_t>(sizeof(addr)));
  return addr;
}

TEST(ShmDatapath, dead_receiver__its_buffers_are_taken_back) {
  ShmConfig c;
  c.buffers = 32;
  auto a = open_ok(c);
  ASSERT_TRUE(a);
  // The child receives nothing and exits on our word.
  Pipe go;
  Child child;
  const NetAddr addr = spawn_endpoint(child, [&](ShmDatapath&) { go.await(); });
  ASSERT_EQ(addr.family, NetAddr::Family::kIpv4);
  std::vector<PacketBuf*> burst(32);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, addr, 100));
  a->tx_burst(burst.data(), burst.size());
  EXPECT_EQ(a->stats().tx_packets, 32u);  // lent to a live receiver that never frees them
  PacketBuf* more = nullptr;
  EXPECT_EQ(a->alloc(&more, 1), 0u);
  go.signal();
  ASSERT_TRUE(child.reap());
  ASSERT_EQ(a->alloc(burst.data(), 32), 32u);  // all back once it is gone
  EXPECT_EQ(a->stats().reclaimed_from_dead, 32u);
  a->free(burst.data(), 32);
  // Its region is unmapped and its name gone: later packets to it are unreachable.
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, addr, 100));
  a->tx_burst(burst.data(), burst.size());
  EXPECT_EQ(a->stats().tx_unreachable, 32u);
  ASSERT_EQ(a->alloc(burst.data(), 32), 32u);
  a->free(burst.data(), 32);
}

TEST(ShmDatapath, dead_sender__its_inbox_slot_is_freed_when_idle) {
  auto b = open_ok();
  ASSERT_TRUE(b);
  const NetAddr to = b->local_address();
  Pipe go;
  Child child;
  const NetAddr addr = spawn_endpoint(child, [&](ShmDatapath& d) {
    std::vector<PacketBuf*> burst(4);
    if (!test::make_burst<ShmDatapath>(d, burst, to, 100)) return;
    d.tx_burst(burst.data(), 1);
    go.await();
    d.tx_burst(burst.data() + 1, 3);
  });
  auto got = receive(*b, 1);  // maps the sender's region
  ASSERT_EQ(got.size(), 1u);
  b->free(got.data(), got.size());
  go.signal();
  ASSERT_TRUE(child.reap());
  // What it sent before dying is still readable: its region stays mapped here.
  got = receive(*b, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2]->peer, addr);
  EXPECT_EQ(got[2]->data[99], 3);
  b->free(got.data(), got.size());
  b->collect_dead_senders();
  EXPECT_EQ(b->stats().slots_freed, 1u);
}

TEST(ShmDatapath, open__removes_regions_left_by_processes_that_died) {
  Pipe info;
  Child child;
  child.pid = ::fork();
  if (child.pid == 0) {  // opens an endpoint and dies without closing it
    std::string error;
    auto d = ShmDatapath::open(ShmConfig{}, error);
    const NetAddr addr = d ? d->local_address() : NetAddr{};
    (void)!::write(info.fd[1], &addr, sizeof(addr));
    ::_exit(0);
  }
  NetAddr addr;
  ASSERT_EQ(::read(info.fd[0], &addr, sizeof(addr)), static_cast<ssize_t>(sizeof(addr)));
  ASSERT_TRUE(child.reap());
  const std::string path = "/dev/shm" + shm::region_name(addr);
  ASSERT_EQ(::access(path.c_str(), F_OK), 0) << path;
  auto d = open_ok();
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " survived";
}

TEST(ShmDatapath, wait__sleeps_until_a_sender_rings_the_doorbell) {
  auto a = open_ok(), b = open_ok();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(b->wait(Duration::milliseconds(2)));  // nothing: times out
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<PacketBuf*> burst(1);
    if (test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 10))
      a->tx_burst(burst.data(), 1);
  });
  // Ten seconds: returning true at all proves the doorbell woke it (or data was there).
  EXPECT_TRUE(b->wait(Duration::seconds(10)));
  sender.join();
  auto got = receive(*b, 1);
  EXPECT_EQ(got.size(), 1u);
  b->free(got.data(), got.size());
  EXPECT_LE(a->stats().tx_doorbells, 1u);
  // A receiver that announced its sleep but finds packets waiting must not block.
  std::vector<PacketBuf*> burst(1);
  ASSERT_TRUE(test::make_burst<ShmDatapath>(*a, burst, b->local_address(), 10));
  a->tx_burst(burst.data(), 1);
  EXPECT_FALSE(b->prepare_wait());
}

TEST(ShmDatapath, read_peer_memory__copies_from_another_process_and_refuses_bad_requests) {
  auto a = open_ok();
  ASSERT_TRUE(a);
  Pipe info, withdraw, withdrawn, go, closed, finish;
  Child child;
  std::vector<uint8_t> pattern(300000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 1);
  constexpr uint64_t kKey = 0x5000000000000123, kKeyLeftOffered = 0x5000000000000124;
  child.pid = ::fork();
  if (child.pid == 0) {  // holds `pattern` (its own copy after fork) at a known address
    std::string error;
    auto d = ShmDatapath::open(ShmConfig{}, error);
    const NetAddr addr = d ? d->local_address() : NetAddr{};
    std::vector<uint8_t> mine(pattern);
    const uint64_t where = reinterpret_cast<uint64_t>(mine.data());
    if (d) d->offer_for_reading(kKey);
    if (d) d->offer_for_reading(kKeyLeftOffered);
    offer_source(info, {addr, where});
    withdraw.await();
    if (d) d->withdraw_from_reading(kKey);
    withdrawn.signal();
    go.await();
    d.reset();  // closed with kKeyLeftOffered's send still live: `mine` is ours again
    closed.signal();
    finish.await();
    ::_exit(0);
  }
  OfferedSource source;
  ASSERT_TRUE(await_source(info, source));
  const auto [addr, where] = source;
  std::vector<uint8_t> got(pattern.size(), 0);
  if (a->read_peer_memory(addr, kKey, where, got.data(), got.size())) {
    EXPECT_EQ(got, pattern);
    EXPECT_EQ(a->stats().peer_read_bytes, pattern.size());
    // An address the peer does not map: refused, nothing written past what was asked.
    EXPECT_FALSE(a->read_peer_memory(addr, kKey, 8, got.data(), 16));
    // A key the peer does not offer (one sharing the offered key's entry, and none).
    EXPECT_FALSE(a->read_peer_memory(addr, kKey + shm::kReadableKeys, where, got.data(), 16));
    EXPECT_FALSE(a->read_peer_memory(addr, 0, where, got.data(), 16));
    EXPECT_EQ(a->stats().peer_reads_withdrawn, 2u);
    // Once the peer withdraws the key, copies of the same bytes fail.
    withdraw.signal();
    withdrawn.await();
    EXPECT_FALSE(a->read_peer_memory(addr, kKey, where, got.data(), got.size()));
    EXPECT_EQ(a->stats().peer_reads_withdrawn, 3u);
    // A key its owner never withdrew counts until the owner closes the endpoint (its
    // process lives on, and so does the buffer, now the application's).
    EXPECT_TRUE(a->read_peer_memory(addr, kKeyLeftOffered, where, got.data(), 16));
    EXPECT_EQ(a->stats().peer_reads, 2u);
    go.signal();
    closed.await();
    EXPECT_FALSE(a->read_peer_memory(addr, kKeyLeftOffered, where, got.data(), 16));
    EXPECT_EQ(a->stats().peer_reads_withdrawn, 4u);
  } else {
    // Cross-memory attach forbidden here (Yama ptrace_scope): the engine falls back.
    std::cout << "note: process_vm_readv refused on this machine\n";
    withdraw.signal();
    go.signal();
  }
  NetAddr nobody = addr;
  nobody.port = static_cast<uint16_t>(nobody.port ^ 0x4000);
  EXPECT_FALSE(a->read_peer_memory(nobody, kKey, where, got.data(), 16));
  EXPECT_GE(a->stats().peer_reads_refused, 1u);
  finish.signal();
  ASSERT_TRUE(child.reap());
}

// On some CPUs the kernel's copy is slow when the destination lies a few bytes past the
// source (modulo 4 KiB), so there such reads go through a bounce buffer: every byte must
// still land where it belongs, across bounce pieces, from a source that does not start a
// page, whichever way the read goes (forced either way, and as measured on this CPU).
class ShortDistanceReadsTest : public ::testing::TestWithParam<ShmConfig::ShortDistanceReads> {};

TEST_P(ShortDistanceReadsTest,
       read_peer_memory__lands_every_byte_whatever_the_distance_to_the_source) {
  ShmConfig config;
  config.short_distance_reads = GetParam();
  auto a = open_ok(config);
  ASSERT_TRUE(a);
  Pipe info, finish;
  Child child;
  constexpr size_t kLength = 600000;     // more than two of the bounce buffer's pieces
  constexpr size_t kSourceOffset = 100;  // into its page
  constexpr uint64_t kKey = 0x5000000000000321;
  auto pattern = [](size_t i) { return static_cast<uint8_t>(i * 13 + i / 4099 + 5); };
  child.pid = ::fork();
  if (child.pid == 0) {
    std::string error;
    auto d = ShmDatapath::open(ShmConfig{}, error);
    const NetAddr addr = d ? d->local_address() : NetAddr{};
    // aligned_alloc wants a whole number of alignments.
    auto* page = static_cast<uint8_t*>(
        ::aligned_alloc(4096, (kSourceOffset + kLength + 4095) / 4096 * 4096));
    for (size_t i = 0; i < kLength; ++i) page[kSourceOffset + i] = pattern(i);
    const uint64_t where = reinterpret_cast<uint64_t>(page + kSourceOffset);
    if (d) d->offer_for_reading(kKey);
    offer_source(info, {addr, where});
    finish.await();
    ::_exit(0);
  }
  OfferedSource source;
  ASSERT_TRUE(await_source(info, source));
  const auto [addr, where] = source;
  std::vector<uint8_t> page_aligned(kLength + 2 * 4096);
  uint8_t* base =
      page_aligned.data() + (4096 - reinterpret_cast<uintptr_t>(page_aligned.data()) % 4096);
  uint64_t bounced = 0;
  bool refused = false;
  const bool bounces =
      GetParam() == ShmConfig::ShortDistanceReads::kBounced ||
      (GetParam() == ShmConfig::ShortDistanceReads::kMeasured && bounce_short_distance_reads());
  // Distance (destination - source, modulo 4 KiB) and length: the slow window's edges,
  // a short copy inside it, and distances outside it.
  const std::pair<size_t, size_t> cases[] = {{16, kLength},  {1, kLength}, {63, kLength},
                                             {16, 2000},     {0, kLength}, {64, kLength},
                                             {4080, kLength}};
  for (const auto& [distance, length] : cases) {
    uint8_t* into = base + (kSourceOffset + distance) % 4096;
    std::memset(into, 0, length);
    if (!a->read_peer_memory(addr, kKey, where, into, length)) {
      refused = true;  // cross-memory attach forbidden here: nothing to check
      break;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < length; ++i) wrong += into[i] != pattern(i);
    EXPECT_EQ(wrong, 0u) << "distance " << distance << ", " << length << " bytes";
    const bool slow = distance > 0 && distance < 64 && length > 2048;
    bounced += slow && bounces ? 1 : 0;
    EXPECT_EQ(a->stats().peer_reads_bounced, bounced) << "distance " << distance;
  }
  if (refused) std::cout << "note: process_vm_readv refused on this machine\n";
  finish.signal();
  ASSERT_TRUE(child.reap());
}

INSTANTIATE_TEST_SUITE_P(ShmDatapath, ShortDistanceReadsTest,
                         ::testing::Values(ShmConfig::ShortDistanceReads::kDirect,
                                           ShmConfig::ShortDistanceReads::kBounced,
                                           ShmConfig::ShortDistanceReads::kMeasured),
                         [](const auto& test_param) {
                           switch (test_param.param) {
                             case ShmConfig::ShortDistanceReads::kDirect:
                               return "direct";
                             case ShmConfig::ShortDistanceReads::kBounced:
                               return "bounced";
                             case ShmConfig::ShortDistanceReads::kMeasured:
                               break;
                           }
                           return "measured";
                         });

TEST(ShmEngine, transfer__between_two_engines) {
  auto da = open_ok(), db = open_ok();
  ASSERT_TRUE(da && db);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(20);
  test::transfer_in_real_time(*da, *db, {0, 1, 1000, 70000, 8 << 20, 3 << 20}, ec,
                              Duration::seconds(20));
  EXPECT_EQ(da->stats().tx_dropped, 0u);
  EXPECT_EQ(db->stats().rx_malformed, 0u);
  // The rendezvous sizes (70000, 8 MiB, 3 MiB) were copied by B from A's memory.
  EXPECT_EQ(db->stats().peer_read_bytes, 70000u + (8u << 20) + (3u << 20));
}

// Endpoints need not agree on an MTU: each sends packets as large as its own allows and
// receives whatever its peer's region holds (each packet is read in its sender's buffer,
// checked against the sender's layout). Here B's MTU is 1500 bytes and A's the default
// 16467, so B takes packets eleven times its own MTU, and every byte must arrive both
// ways, eager (up to 64 KiB) and rendezvous. Under ASan, a receive path that assumed a
// packet fits its own MTU would show here.
TEST(ShmEngine, transfer__between_engines_of_different_mtus_both_ways) {
  ShmConfig small;
  small.mtu_bytes = 1500;
  auto da = open_ok(), db = open_ok(small);
  ASSERT_TRUE(da && db);
  ASSERT_EQ(db->mtu(), 1500u);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(20);
  const std::vector<uint64_t> sizes = {1, 1400, 1500, 16000, 16467, 40000, 65536, 70000, 1 << 20};
  test::transfer_in_real_time(*da, *db, sizes, ec, Duration::seconds(20));
  // A's eager messages went in its own large packets: 18 packets in all on 2026-11-28,
  // where packets of B's MTU would have taken over 100.
  EXPECT_LT(da->stats().tx_packets, 60u);
  test::transfer_in_real_time(*db, *da, sizes, ec, Duration::seconds(20));
  EXPECT_EQ(da->stats().rx_malformed, 0u);
  EXPECT_EQ(db->stats().rx_malformed, 0u);
}

}  // namespace
}  // namespace spray::dp
