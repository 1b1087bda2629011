// A send that waits for a PDC (the table holds fewer than the peers it is sent to)
// counts its wait from when it was posted. The engine stamps an operation with its
// clock, which only progress moved before: a send posted before any progress, as the
// second of a run posted with FI_MORE is, began its wait at time zero, and the first
// check of the wait found it 10 s overdue and failed it with FI_EAGAIN ("no PDC
// available"). The same befell a send posted after a pause of more than 10 s.
//
// Run with two-PDC tables (two_pdc_tables_main.cc): an endpoint holds one PDC of its own,
// so the send to the second peer waits until the first PDC has closed.
#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

TEST_F(Fabric, pdc_wait__a_run_of_sends_to_more_peers_than_the_table_holds_all_arrive) {
  ASSERT_EQ(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
  fid_ep* a = endpoint();
  endpoint();  // B
  endpoint();  // C
  const std::vector<uint8_t> to_b = pattern(1000, 1), to_c = pattern(3000, 2);
  std::vector<uint8_t> at_b(to_b.size()), at_c(to_c.size());
  ASSERT_EQ(fi_recv(eps[1], at_b.data(), at_b.size(), nullptr, addrs[0], nullptr), 0);
  ASSERT_EQ(fi_recv(eps[2], at_c.data(), at_c.size(), nullptr, addrs[0], nullptr), 0);
  // A's first calls: nothing has progressed it yet when the send to C is posted.
  auto send = [&](const std::vector<uint8_t>& data, fi_addr_t to, uint64_t flags) {
    const iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    fi_msg m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = to;
    return fi_sendmsg(a, &m, flags);
  };
  ASSERT_EQ(send(to_b, addrs[1], FI_MORE), 0);
  ASSERT_EQ(send(to_c, addrs[2], 0), 0);
  EXPECT_EQ(wait(4).size(), 4u);  // both sends and both receives, none an error
  EXPECT_EQ(at_b, to_b);
  EXPECT_EQ(at_c, to_c);
}

}  // namespace
}  // namespace spray_fi_test
