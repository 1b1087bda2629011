// fi_close of an endpoint closes its PDCs at its peers before it goes (FI_SPRAY_CLOSE_WAIT_MS),
// so that no peer is left holding one for an endpoint that is gone.
//
// Run with two-PDC tables (two_pdc_tables_main.cc): without the close at fi_close, A's
// send to C below waits for A's PDC to the closed B to close, which nobody answers, and
// fails with FI_EAGAIN.
#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct EndpointClose : Fabric {
  void SetUp() override {
    data_progress = FI_PROGRESS_AUTO;  // A answers while B's fi_close runs
    open(FI_EP_RDM, FI_MSG);
  }
  // Sends `bytes` from eps[from] to eps[to] and waits for both completions.
  void deliver(size_t from, size_t to, size_t bytes, uint8_t seed) {
    const std::vector<uint8_t> data = pattern(bytes, seed);
    std::vector<uint8_t> into(bytes);
    ASSERT_EQ(fi_recv(eps[to], into.data(), into.size(), nullptr, addrs[from], nullptr), 0);
    ASSERT_EQ(fi_send(eps[from], data.data(), data.size(), nullptr, addrs[to], nullptr), 0);
    wait(2);
    EXPECT_EQ(into, data);
  }
};

TEST_F(EndpointClose, a_peers_pdc_to_a_closed_endpoint_is_gone_and_its_next_peer_is_reached) {
  endpoint();              // A
  endpoint();              // B
  endpoint();              // C
  deliver(0, 1, 1000, 1);  // A's one PDC of its own goes to B
  ASSERT_EQ(fi_close(&eps[1]->fid), 0);
  eps.erase(eps.begin() + 1);
  addrs.erase(addrs.begin() + 1);
  deliver(0, 1, 1000, 2);  // to C, now eps[1]
}

}  // namespace
}  // namespace spray_fi_test
