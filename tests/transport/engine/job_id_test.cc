// UET's JobID: an endpoint takes only packets whose SES header names its job. Endpoints of
// two jobs on one fabric ignore each other completely — nothing delivered, written, read
// or answered, no PDC opened — and each side's operations towards the other end as they
// would towards a dead peer. Endpoints of one job (any JobID, 0 included) work as ever.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kKey = 77;
constexpr uint32_t kJob = 0x00abcdef;

// Hosts 0 and 1 in the jobs given; host 1 exposes a region for RMA.
class TwoHosts : public ::testing::Test {
 protected:
  TwoHosts(uint32_t job_of_host0, uint32_t job_of_host1)
      : cluster(sim::FabricConfig{}, engine::EngineConfig{},
                [=](uint32_t host, engine::EngineConfig& c) {
                  c.ses.job_id = host == 0 ? job_of_host0 : job_of_host1;
                }),
        waiter(cluster) {
    region.assign(64 * 1024, 0x11);
    EXPECT_EQ(
        cluster.engine(1).register_memory({region.data(), region.size(), 0, kKey,
                                           ses::access::kRemoteRead | ses::access::kRemoteWrite}),
        Status::kOk);
  }

  // Host 1 posts two receives (contexts 100, 101); host 0 sends an eager and a
  // rendezvous message (1, 2), writes `eager` at offset 0 of the region (3), reads 4 KiB
  // at 8192 (4) and writes 500 bytes idempotently (RUDI) at 4096 (5).
  void post_every_operation() {
    ASSERT_EQ(cluster.engine(1).post_recv({got_eager.data(), got_eager.size(), 100}), Status::kOk);
    ASSERT_EQ(cluster.engine(1).post_recv({got_rendezvous.data(), got_rendezvous.size(), 101}),
              Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, eager.data(), eager.size(), 1), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, rendezvous.data(), rendezvous.size(), 2), Status::kOk);
    ASSERT_EQ(cluster.engine(0).write(1, eager.data(), eager.size(), 0, kKey, 3), Status::kOk);
    ASSERT_EQ(cluster.engine(0).read(1, read_into.data(), read_into.size(), 8192, kKey, 4),
              Status::kOk);
    ASSERT_EQ(cluster.engine(0).write_idempotent(1, eager.data(), 500, 4096, kKey, 5), Status::kOk);
  }

  sim::Cluster cluster;
  CompletionWaiter waiter;
  std::vector<uint8_t> region;  // host 1's, remotely readable and writable
  std::vector<uint8_t> eager = std::vector<uint8_t>(3000, 0x5a);
  std::vector<uint8_t> rendezvous = std::vector<uint8_t>(200000, 0x6b);
  std::vector<uint8_t> read_into = std::vector<uint8_t>(4096, 0);
  std::vector<uint8_t> got_eager = std::vector<uint8_t>(eager.size(), 0);
  std::vector<uint8_t> got_rendezvous = std::vector<uint8_t>(rendezvous.size(), 0);
};

bool all_equal(const std::vector<uint8_t>& v, uint8_t value) {
  return std::all_of(v.begin(), v.end(), [value](uint8_t b) { return b == value; });
}

class ForeignJob : public TwoHosts {
 protected:
  ForeignJob() : TwoHosts(0, kJob) {}
};

class OneJob : public TwoHosts {
 protected:
  OneJob() : TwoHosts(kJob, kJob) {}
};

TEST_F(ForeignJob, every_operation_to_another_jobs_endpoint_fails_as_to_a_dead_one) {
  post_every_operation();
  ses::SendSpec ordered;
  ordered.mode = pds::Mode::kRod;
  ASSERT_EQ(cluster.engine(0).send(1, eager.data(), eager.size(), 6, ordered), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send_datagram(1, eager.data(), 100, 7), Status::kOk);

  for (uint64_t ctx : {1, 2, 3, 4, 5, 6}) {
    auto c = waiter.wait(0, ctx, Duration::seconds(10));
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kPeerUnreachable) << ctx;
  }
  auto datagram = waiter.wait(0, 7);  // unreliable: done once it left
  ASSERT_TRUE(datagram);
  EXPECT_EQ(datagram->status, Status::kOk);
  // Let the MSG_ERRs of the failed sends run their course too.
  cluster.run_until([] { return false; }, Duration::seconds(15));

  // Host 1 took nothing: no completion, no byte placed, region untouched, no PDC, and it
  // never sent a packet (no ACK, NACK or answer tells host 0 it is there).
  EXPECT_EQ(waiter.pending(1), 0u);
  EXPECT_TRUE(all_equal(got_eager, 0));
  EXPECT_TRUE(all_equal(got_rendezvous, 0));
  EXPECT_TRUE(all_equal(region, 0x11));
  EXPECT_TRUE(all_equal(read_into, 0));
  EXPECT_EQ(cluster.engine(1).pds().open_pdcs(), 0u);
  EXPECT_EQ(cluster.engine(1).pds().stats().tx_packets, 0u);
  EXPECT_EQ(cluster.engine(1).stats().tx_packets, 0u);
  EXPECT_GT(cluster.engine(1).stats().rx_foreign_job, 0u);
  EXPECT_EQ(cluster.engine(1).stats().rx_malformed, 0u);  // counted as foreign, not forged
  EXPECT_EQ(cluster.engine(1).ses().stats().messages_received, 0u);
  // Host 0 ends with nothing in flight or held.
  EXPECT_EQ(cluster.engine(0).pds().open_pdcs(), 0u);
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);
}

TEST_F(ForeignJob, the_other_job_is_ignored_in_the_other_direction_too) {
  std::vector<uint8_t> src(5000, 0x42), dst(5000, 0);
  ASSERT_EQ(cluster.engine(0).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, src.data(), src.size(), 1), Status::kOk);
  auto c = waiter.wait(1, 1, Duration::seconds(10));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kPeerUnreachable);
  EXPECT_EQ(waiter.pending(0), 0u);
  EXPECT_TRUE(all_equal(dst, 0));
  EXPECT_GT(cluster.engine(0).stats().rx_foreign_job, 0u);
}

// A stranger (an address host 1 never heard of) whose packet names another job is
// dropped before host 1 learns it: it takes no place in the peer table. One of host 1's
// job is learned, as any connectionless peer is.
TEST_F(ForeignJob, a_stranger_of_another_job_takes_no_place_in_the_peer_table) {
  const auto syn_send_from = [](uint32_t job) {
    std::vector<uint8_t> pkt(wire::kRequestBytes + wire::kSesStandardBytes + 10, 0);
    wire::PdsRequest h;
    h.flags = wire::request_flags::kSyn;
    h.psn = 1000;
    h.spdcid = 3;
    EXPECT_GT(wire::encode(h, pkt), 0u);
    wire::SesStandardRequest s;
    s.common.opcode = wire::SesOpcode::kSend;
    s.common.flags = wire::ses_flags::kStartOfMessage | wire::ses_flags::kEndOfMessage;
    s.common.job_id = job;
    s.request_length = 10;
    EXPECT_GT(wire::encode(s, std::span<uint8_t>(pkt).subspan(wire::kRequestBytes)), 0u);
    return pkt;
  };
  constexpr uint32_t kStranger = 7, kNewcomer = 8;  // no such hosts: addresses only
  test_support::inject(cluster, kStranger, 1, syn_send_from(0));
  cluster.run_until([] { return false; }, Duration::microseconds(50));
  EXPECT_FALSE(cluster.engine(1).find_peer(dp::NetAddr::sim_host(kStranger)).has_value());
  EXPECT_EQ(cluster.engine(1).stats().rx_foreign_job, 1u);

  test_support::inject(cluster, kNewcomer, 1, syn_send_from(kJob));
  cluster.run_until([] { return false; }, Duration::microseconds(50));
  EXPECT_TRUE(cluster.engine(1).find_peer(dp::NetAddr::sim_host(kNewcomer)).has_value());
  EXPECT_EQ(cluster.engine(1).stats().rx_foreign_job, 1u);
}

// Both hosts in one job other than 0: every kind of operation works, and no packet was
// taken for foreign.
TEST_F(OneJob, every_operation_works_between_endpoints_of_one_job) {
  post_every_operation();
  for (uint64_t ctx : {1, 2, 3, 4, 5}) {
    auto c = waiter.wait(0, ctx, Duration::seconds(10));
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kOk) << ctx;
  }
  for (uint64_t ctx : {100, 101}) {
    auto c = waiter.wait(1, ctx);
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kOk) << ctx;
  }
  EXPECT_EQ(got_eager, eager);
  EXPECT_EQ(got_rendezvous, rendezvous);
  EXPECT_TRUE(std::equal(eager.begin(), eager.end(), region.begin()));
  EXPECT_TRUE(std::equal(eager.begin(), eager.begin() + 500, region.begin() + 4096));
  EXPECT_TRUE(all_equal(read_into, 0x11));
  EXPECT_EQ(cluster.engine(0).stats().rx_foreign_job, 0u);
  EXPECT_EQ(cluster.engine(1).stats().rx_foreign_job, 0u);
}

}  // namespace
}  // namespace spray
