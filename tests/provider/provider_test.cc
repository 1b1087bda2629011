// Conformance tests of the `spray` provider, written only against the public libfabric
// API: libfabric loads libspray-fi.so from FI_PROVIDER_PATH (set by ctest), exactly as an
// application would see it. fi_getinfo, messages, tagged matching, CQs, counters, AVs,
// misuse and dead peers; probes and RMA have files of their own.
#include "tests/provider/fabric_fixture.h"
#include "tests/support/capped_child.h"

namespace spray_fi_test {
namespace {

TEST(GetInfo, null_hints__list_rdm_and_dgram_with_their_capabilities) {
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(kVersion, nullptr, nullptr, 0, nullptr, &info), 0);
  bool rdm = false, dgram = false;
  for (fi_info* i = info; i; i = i->next) {
    if (std::strcmp(i->fabric_attr->prov_name, "spray") != 0) continue;
    EXPECT_EQ(std::string(i->fabric_attr->name), "spray");
    if (i->ep_attr->type == FI_EP_RDM) {
      rdm = true;
      constexpr uint64_t want = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV |
                                FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
      EXPECT_EQ(i->caps & want, want);
      EXPECT_TRUE(i->tx_attr->msg_order & FI_ORDER_SAS);
      EXPECT_GE(i->domain_attr->cq_data_size, 4u);
      EXPECT_GT(i->tx_attr->inject_size, 0u);
      EXPECT_GE(i->ep_attr->max_msg_size, size_t{64} << 20);
      EXPECT_EQ(i->mode, 0u);
    }
    if (i->ep_attr->type == FI_EP_DGRAM) dgram = true;
  }
  EXPECT_TRUE(rdm);
  EXPECT_TRUE(dgram);
  fi_freeinfo(info);
}

TEST(GetInfo, hints__narrow_and_unmeetable_hints_match_nothing) {
  fi_info* info = getinfo(hints_for(FI_EP_RDM, FI_TAGGED));
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->next, nullptr);  // RDM only
  EXPECT_TRUE(info->caps & FI_TAGGED);
  EXPECT_FALSE(info->caps & FI_SOURCE);  // not asked for
  fi_freeinfo(info);

  EXPECT_EQ(getinfo(hints_for(FI_EP_MSG, FI_MSG)), nullptr);         // no MSG endpoints
  EXPECT_EQ(getinfo(hints_for(FI_EP_DGRAM, FI_ATOMIC)), nullptr);    // atomics are RDM's
  EXPECT_EQ(getinfo(hints_for(FI_EP_RDM, FI_COLLECTIVE)), nullptr);  // no collectives
  EXPECT_EQ(getinfo(hints_for(FI_EP_DGRAM, FI_TAGGED)), nullptr);    // DGRAM is untagged

  fi_info* h = hints_for(FI_EP_RDM, FI_MSG);
  h->domain_attr->cq_data_size = 16;
  EXPECT_EQ(getinfo(h), nullptr);
  h = hints_for(FI_EP_RDM, FI_MSG);
  h->tx_attr->msg_order = FI_ORDER_DATA;  // a rendezvous send's data comes later
  EXPECT_EQ(getinfo(h), nullptr);
  h = hints_for(FI_EP_RDM, FI_MSG);
  h->ep_attr->max_msg_size = size_t{1} << 40;
  EXPECT_EQ(getinfo(h), nullptr);
  h = hints_for(FI_EP_RDM, FI_RMA);
  h->ep_attr->max_order_war_size = 4096;  // reads above 1024 B are not snapshotted
  EXPECT_EQ(getinfo(h), nullptr);
  h = hints_for(FI_EP_RDM, FI_RMA);
  h->ep_attr->max_order_war_size = 1024;
  h->ep_attr->max_order_raw_size = SIZE_MAX;  // -1: any size
  fi_info* ordered = getinfo(h);
  EXPECT_NE(ordered, nullptr);
  fi_freeinfo(ordered);
  h = hints_for(FI_EP_RDM, FI_MSG);
  h->domain_attr->name = strdup("not-spray");
  EXPECT_EQ(getinfo(h), nullptr);
  h = hints_for(FI_EP_RDM, FI_MSG);
  h->addr_format = FI_ADDR_PSMX2;
  EXPECT_EQ(getinfo(h), nullptr);
}

TEST(GetInfo, hints__modes_threading_progress_and_mr_bits_are_honoured) {
  fi_info* h = hints_for(FI_EP_RDM, FI_MSG);
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->data_progress = FI_PROGRESS_AUTO;
  h->domain_attr->av_type = FI_AV_MAP;
  h->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL;
  fi_info* info = getinfo(h);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->mode, 0u);  // we need no context space
  EXPECT_EQ(info->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_EQ(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
  EXPECT_EQ(info->domain_attr->av_type, FI_AV_MAP);
  EXPECT_EQ(info->domain_attr->mr_mode, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);  // never MR_LOCAL
  fi_freeinfo(info);
}

// Before API 1.5 mr_mode was one of FI_MR_BASIC and FI_MR_SCALABLE; an application of
// that API gets its answer in those terms, and either value is understood at any version
// (BASIC: provider keys, virtual addresses, allocated memory; SCALABLE: none of them).
TEST(GetInfo, api_before_1_5__answers_mr_basic_or_scalable) {
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(0, 0), nullptr, nullptr, 0, nullptr, &info), 0);
  int spray = 0;
  for (fi_info* i = info; i; i = i->next) {
    if (std::strcmp(i->fabric_attr->prov_name, "spray") != 0) continue;
    ++spray;
    EXPECT_EQ(i->domain_attr->mr_mode, FI_MR_SCALABLE);
  }
  EXPECT_EQ(spray, 2) << "RDM and DGRAM";
  fi_freeinfo(info);

  fi_info* h = hints_for(FI_EP_RDM, FI_RMA);
  h->domain_attr->mr_mode = FI_MR_BASIC;
  info = getinfo(h, FI_VERSION(1, 4));
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->domain_attr->mr_mode, FI_MR_BASIC);
  fi_freeinfo(info);

  h = hints_for(FI_EP_RDM, FI_RMA);
  h->domain_attr->mr_mode = FI_MR_BASIC;
  info = getinfo(h);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->domain_attr->mr_mode, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED);
  fi_freeinfo(info);
}

// MPICH 4.0's ch4:ofi netmod finds its provider in two steps (init_provider.c): a list
// for NULL hints at version 0 (its settings, which hold the version, are not read yet),
// then its own hints (init_settings.c) at the real version, relaxing msg_order and then
// mr_mode to the first answer's while nothing matches; it refuses an answer whose
// threading is not FI_THREAD_DOMAIN. Refusing version 0 once kept MPICH off spray
// entirely. scripts/mpich-over-spray.sh runs MPICH itself; this keeps its steps in CI.
TEST(GetInfo, mpich_ch4_ofi__finds_spray_in_its_two_steps) {
  fi_info* listed = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(0, 0), nullptr, nullptr, 0, nullptr, &listed), 0);
  const fi_info* picked = nullptr;
  for (const fi_info* i = listed; i; i = i->next) {
    if (std::strcmp(i->fabric_attr->prov_name, "spray") == 0 && i->ep_attr->type == FI_EP_RDM) {
      picked = i;
    }
  }
  ASSERT_NE(picked, nullptr);
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup("spray");
  h->caps = picked->caps | FI_DIRECTED_RECV;
  h->mode = FI_CONTEXT | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_CONTEXT2;
  h->addr_format = FI_FORMAT_UNSPEC;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  h->domain_attr->av_type = FI_AV_TABLE;
  h->domain_attr->mr_mode = 0;
  h->domain_attr->mode = FI_RESTRICTED_COMP;
  h->domain_attr->cq_data_size = 4;
  h->tx_attr->op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
  h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW |
                          FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
  h->tx_attr->comp_order = FI_ORDER_NONE;
  h->rx_attr->op_flags = FI_COMPLETION;
  h->ep_attr->type = FI_EP_RDM;
  h->ep_attr->mem_tag_format = 0x0000000fffffffffULL;
  fi_info* found = nullptr;
  if (fi_getinfo(kVersion, nullptr, nullptr, 0, h, &found) != 0) {
    h->tx_attr->msg_order = picked->tx_attr->msg_order;
    if (fi_getinfo(kVersion, nullptr, nullptr, 0, h, &found) != 0) {
      h->domain_attr->mr_mode = picked->domain_attr->mr_mode;
      EXPECT_EQ(fi_getinfo(kVersion, nullptr, nullptr, 0, h, &found), 0);
    }
  }
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->domain_attr->threading, FI_THREAD_DOMAIN);
  // MPICH does MPI's accumulates with libfabric atomics only when the provider keeps
  // these orders (init_settings.c) and data orders of at least an element
  // (MPIDI_OFI_check_acc_order_size); otherwise as its own active messages.
  constexpr uint64_t kAtomicOrder =
      FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
  EXPECT_EQ(found->tx_attr->msg_order & kAtomicOrder, kAtomicOrder);
  EXPECT_GE(found->ep_attr->max_order_raw_size, sizeof(uint64_t));
  EXPECT_GE(found->ep_attr->max_order_war_size, sizeof(uint64_t));
  EXPECT_GE(found->ep_attr->max_order_waw_size, sizeof(uint64_t));
  constexpr uint64_t kMpichCaps = FI_TAGGED | FI_DIRECTED_RECV | FI_MSG | FI_MULTI_RECV | FI_RMA |
                                  FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  EXPECT_EQ(found->caps & kMpichCaps, kMpichCaps);
  fi_freeinfo(found);
  fi_freeinfo(h);
  fi_freeinfo(listed);
}

TEST(GetInfo, node_and_service__become_the_destination_or_with_fi_source_the_source) {
  fi_info* info = nullptr;
  fi_info* h = hints_for(FI_EP_RDM, FI_MSG);
  ASSERT_EQ(fi_getinfo(kVersion, "127.0.0.1", "4800", 0, h, &info), 0);
  ASSERT_NE(info->dest_addr, nullptr);
  EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(info->dest_addr)->sin_port), 4800);
  fi_freeinfo(info);
  ASSERT_EQ(fi_getinfo(kVersion, "127.0.0.1", "4808", FI_SOURCE, h, &info), 0);
  ASSERT_NE(info->src_addr, nullptr);
  EXPECT_EQ(info->dest_addr, nullptr);
  EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(info->src_addr)->sin_port), 4808);
  fi_freeinfo(info);
  fi_freeinfo(h);
}

// A fabric, domain, AV and CQ, and endpoints on them, all on loopback.
TEST_F(Fabric, msg__every_size_arrives_byte_exact_with_its_source) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{1000}, size_t{1500}, size_t{70000}, size_t{4} << 20}) {
    auto out = pattern(size, static_cast<uint8_t>(size));
    std::vector<uint8_t> in(size + 16, 0xee);
    int rctx = 0, sctx = 0;
    ASSERT_EQ(fi_recv(b, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &rctx), 0);
    ASSERT_EQ(fi_send(a, out.data(), out.size(), nullptr, addrs[1], &sctx), 0);
    std::vector<fi_addr_t> from;
    auto done = wait(2, &from);
    ASSERT_EQ(done.size(), 2u);
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i].op_context == &rctx) {
        EXPECT_EQ(done[i].flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
        EXPECT_EQ(done[i].len, size);
        EXPECT_EQ(done[i].buf, in.data());
        EXPECT_EQ(from[i], addrs[0]);
      } else {
        EXPECT_EQ(done[i].op_context, &sctx);
        EXPECT_EQ(done[i].flags & (FI_SEND | FI_MSG), FI_SEND | FI_MSG);
      }
    }
    EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << size << " bytes";
    EXPECT_EQ(in[size], 0xee) << "wrote past the message";
  }
}

TEST_F(Fabric, tagged__matches_by_tag_ignore_mask_and_source_in_send_order) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  fid_ep* c = endpoint();
  uint64_t va = 0, vc = 0, r1 = 0, r2 = 0, r3 = 0;
  // Posted before anything is sent: a directed receive for C only, then tag 0x5? from anyone.
  ASSERT_EQ(fi_trecv(b, &r1, 8, nullptr, addrs[2], 0x77, 0, &r1), 0);
  ASSERT_EQ(fi_trecv(b, &r2, 8, nullptr, FI_ADDR_UNSPEC, 0x50, 0xf, &r2), 0);
  va = 1;
  vc = 3;
  ASSERT_EQ(fi_tsend(a, &va, 8, nullptr, addrs[1], 0x5a, &va), 0);  // matches r2 only
  ASSERT_EQ(fi_tsend(c, &vc, 8, nullptr, addrs[1], 0x77, &vc), 0);  // matches r1
  wait(4);
  EXPECT_EQ(r1, 3u);
  EXPECT_EQ(r2, 1u);
  // Unexpected: sent before the receive is posted; two from one sender stay in order.
  uint64_t m1 = 10, m2 = 20;
  ASSERT_EQ(fi_tsend(a, &m1, 8, nullptr, addrs[1], 9, &m1), 0);
  ASSERT_EQ(fi_tsend(a, &m2, 8, nullptr, addrs[1], 9, &m2), 0);
  wait(2);
  std::vector<fi_addr_t> from;
  ASSERT_EQ(fi_trecv(b, &r3, 8, nullptr, FI_ADDR_UNSPEC, 9, 0, &r3), 0);
  auto got = wait(1, &from);
  EXPECT_EQ(r3, 10u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].tag, 9u);
  EXPECT_EQ(got[0].flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
  EXPECT_EQ(from[0], addrs[0]);
  ASSERT_EQ(fi_trecv(b, &r3, 8, nullptr, FI_ADDR_UNSPEC, 9, 0, &r3), 0);
  wait(1);
  EXPECT_EQ(r3, 20u);
}

TEST_F(Fabric, senddata_and_inject__deliver_remote_cq_data_and_need_no_buffer) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  char in[64] = {};
  ASSERT_EQ(fi_recv(b, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, in), 0);
  char msg[16] = "fifteen bytes!";
  ASSERT_EQ(fi_senddata(a, msg, 15, nullptr, 0xfeedULL, addrs[1], msg), 0);
  auto done = wait(2);
  for (auto& e : done) {
    if (e.op_context == in) {
      EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
      EXPECT_EQ(e.data, 0xfeedULL);
    }
  }
  ASSERT_EQ(fi_recv(b, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, in), 0);
  ASSERT_EQ(fi_inject(a, msg, 15, addrs[1]), 0);
  std::memset(msg, 0, sizeof(msg));  // reusable at once
  done = wait(1);                    // the receive only: inject reports nothing
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].op_context, in);
  EXPECT_EQ(std::string(in, 14), "fifteen bytes!");
  std::vector<char> big(info->tx_attr->inject_size + 1);
  EXPECT_EQ(fi_inject(a, big.data(), big.size(), addrs[1]), -FI_EINVAL);
}

TEST_F(Fabric, truncation__is_an_error_completion_with_the_prefix_placed) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  auto out = pattern(100, 1);
  std::vector<uint8_t> in(40);
  ASSERT_EQ(fi_recv(b, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, in.data()), 0);
  ASSERT_EQ(fi_send(a, out.data(), out.size(), nullptr, addrs[1], out.data()), 0);
  fi_cq_err_entry err = wait_error();
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, in.data());
  EXPECT_EQ(err.len, 40u);
  EXPECT_EQ(err.olen, 60u);  // the bytes that did not fit
  EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
}

// Errors keep their place among the completions, as in libfabric's own CQs: fi_cq_read
// stops at an error (-FI_EAVAIL) and fi_cq_readerr takes only the error at the head. The
// receives are truncated, whole, truncated; whatever the loop tries first, they are seen
// in that order (a separate error queue let the whole one overtake the first error).
TEST_F(Fabric, cq__an_error_keeps_its_place_among_the_completions) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const auto out = pattern(100, 3);
  std::vector<uint8_t> small1(40), whole(200), small2(40);
  for (auto* in : {&small1, &whole, &small2}) {
    ASSERT_EQ(fi_recv(b, in->data(), in->size(), nullptr, FI_ADDR_UNSPEC, in->data()), 0);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(fi_send(a, out.data(), out.size(), nullptr, addrs[1], nullptr), 0);
  }
  std::vector<std::pair<void*, int>> seen;  // receive context, error (0: success)
  size_t sends_done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq, &err, 0) == 1) {
      seen.emplace_back(err.op_context, err.err);
      continue;
    }
    fi_cq_tagged_entry e;
    if (fi_cq_read(cq, &e, 1) != 1) continue;
    if (e.flags & FI_RECV) {
      seen.emplace_back(e.op_context, 0);
    } else {
      ++sends_done;
    }
  }
  const std::vector<std::pair<void*, int>> want = {
      {small1.data(), FI_ETRUNC}, {whole.data(), 0}, {small2.data(), FI_ETRUNC}};
  EXPECT_EQ(seen, want);
  wait(3 - sends_done);
}

TEST_F(Fabric, cancel__completes_a_posted_receive_with_ecanceled) {
  endpoint();
  fid_ep* b = endpoint();
  char buf[8];
  ASSERT_EQ(fi_trecv(b, buf, 8, nullptr, FI_ADDR_UNSPEC, 1, 0, buf), 0);
  EXPECT_EQ(fi_cancel(&b->fid, buf), 0);
  fi_cq_err_entry err = wait_error();
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, buf);
  EXPECT_EQ(fi_cancel(&b->fid, buf), -FI_ENOENT);  // nothing left to cancel
}

// tx_attr->size and rx_attr->size are separate queues: receives posted up to the
// rx size (more get -FI_EAGAIN) must leave room for sends, or an endpoint with many
// receives posted (a NCCL plugin with many peers) can send nothing to satisfy them.
TEST_F(Fabric, queues__receives_fill_the_rx_queue_only_and_sends_still_go) {
  fid_ep* a = endpoint();
  const size_t rx_size = info->rx_attr->size;
  std::vector<uint64_t> sink(rx_size + 1);
  size_t posted = 0;
  while (posted <= rx_size && fi_trecv(a, &sink[posted], sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC,
                                       posted, 0, &sink[posted]) == 0) {
    ++posted;
  }
  EXPECT_EQ(posted, rx_size) << "receives beyond rx_attr->size must get -FI_EAGAIN";
  EXPECT_EQ(fi_trecv(a, &sink[0], sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC, 0, 0, &sink[0]),
            -FI_EAGAIN);
  // A send to ourselves still goes, and fills the receive its tag names.
  const uint64_t value = 0x1234567890abcdef;
  ASSERT_EQ(fi_tsend(a, &value, sizeof value, nullptr, addrs[0], 7, nullptr), 0);
  const auto got = wait(2);  // the receive and the send
  EXPECT_EQ(sink[7], value);
  // The receive's completion freed a place in the rx queue.
  EXPECT_EQ(fi_trecv(a, &sink[7], sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC, 7, 0, &sink[7]), 0);
  for (size_t i = 0; i < posted; ++i) fi_cancel(&a->fid, &sink[i]);
}

TEST_F(Fabric, more__sends_posted_with_FI_MORE_leave_with_the_next_one_without_it) {
  SKIP_UNLESS_STRICT_MANUAL_PROGRESS();
  ASSERT_EQ(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
  fid_ep* a = endpoint();
  SeparateDomain far;
  ASSERT_TRUE(far.open(fabric, info, av, a));
  uint64_t got[4] = {};
  for (uint64_t& g : got) ASSERT_EQ(fi_recv(far.ep, &g, sizeof g, nullptr, far.near, &g), 0);
  const uint64_t values[4] = {11, 22, 33, 44};
  auto send = [&](int i, uint64_t flags) {
    const iovec iov{const_cast<uint64_t*>(&values[i]), sizeof(uint64_t)};
    fi_msg m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = far.address;
    m.context = const_cast<uint64_t*>(&values[i]);
    return fi_sendmsg(a, &m, flags);
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(send(i, FI_MORE), 0);
  // Nothing progresses `a` meanwhile, so nothing of the three has left.
  EXPECT_EQ(far.poll(1, 50), 0);
  EXPECT_EQ(got[0], 0u);
  ASSERT_EQ(send(3, 0), 0);
  EXPECT_EQ(far.poll(4, 10000), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], values[i]) << "receive " << i;
  EXPECT_EQ(wait(4).size(), 4u);  // the sends complete once far has acknowledged them
}

// A rendezvous message whose sender gives up before its receiver has read it (the
// receiver, strictly manual, makes no call meanwhile): the send fails, the sender's
// application writes over its buffer, as it may then, and when the receiver comes back
// its receive fails too. Over shared memory the receiver copies straight from the
// sender's buffer; it used to complete such a receive as a success, holding what the
// application wrote after the failure.
TEST_F(Fabric,
       manual_progress__a_receive_whose_sender_gave_up_fails_rather_than_read_reused_bytes) {
  SKIP_UNLESS_STRICT_MANUAL_PROGRESS();
  fid_ep* a = endpoint();
  std::vector<uint8_t> data = pattern(1 << 20, 7);
  std::vector<uint8_t> into(data.size(), 0);
  SeparateDomain far;
  ASSERT_TRUE(far.open(fabric, info, av, a));
  ASSERT_EQ(fi_recv(far.ep, into.data(), into.size(), nullptr, far.near, &into), 0);
  ASSERT_EQ(fi_send(a, data.data(), data.size(), nullptr, far.address, &data), 0);
  EXPECT_EQ(wait_error().err, FI_EHOSTUNREACH);  // far is silent: a's retries run out
  std::fill(data.begin(), data.end(), 0xee);     // the application's buffer again
  // far comes back, and both sides progress from now on.
  int received = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (received == 0 && std::chrono::steady_clock::now() < deadline) {
    received = far.poll(1, 1);
    fi_cq_tagged_entry e;
    (void)fi_cq_read(cq, &e, 1);
  }
  EXPECT_EQ(received, -1) << "the receive did not fail; it holds "
                          << (into == data ? "the overwritten buffer" : "something");
}

TEST_F(Fabric, sread__blocks_until_the_timeout_when_nothing_arrives) {
  endpoint();
  fi_cq_tagged_entry e;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fi_cq_sread(cq, &e, 1, nullptr, 50), -FI_EAGAIN);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

TEST_F(Fabric, counters__count_completions) {
  fid_ep* a = endpoint();
  fid_ep* b = nullptr;
  fid_cntr* sent = nullptr;
  fid_cntr* received = nullptr;
  fi_cntr_attr attr{};
  attr.events = FI_CNTR_EVENTS_COMP;
  ASSERT_EQ(fi_cntr_open(domain, &attr, &sent, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(domain, &attr, &received, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, info, &b, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(b, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(b, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(b, &received->fid, FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(a, &sent->fid, FI_SEND), -FI_EINVAL);  // a is already enabled
  ASSERT_EQ(fi_enable(b), 0);
  char name[64];
  size_t len = sizeof(name);
  ASSERT_EQ(fi_getname(&b->fid, name, &len), 0);
  fi_addr_t baddr = 0;
  ASSERT_EQ(fi_av_insert(av, name, 1, &baddr, 0, nullptr), 1);
  char buf[3][4];
  for (auto& x : buf) ASSERT_EQ(fi_recv(b, x, 4, nullptr, FI_ADDR_UNSPEC, x), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(fi_inject(a, "abc", 4, baddr), 0);
  EXPECT_EQ(fi_cntr_wait(received, 3, 10000), 0);
  EXPECT_EQ(fi_cntr_read(received), 3u);
  EXPECT_EQ(fi_cntr_readerr(received), 0u);
  EXPECT_EQ(fi_cntr_wait(received, 4, 20), -FI_ETIMEDOUT);
  EXPECT_EQ(fi_cntr_add(received, 2), 0);
  EXPECT_EQ(fi_cntr_read(received), 5u);
  EXPECT_EQ(fi_close(&sent->fid), 0);
  EXPECT_EQ(fi_close(&received->fid), -FI_EBUSY);  // b still bound to it
  EXPECT_EQ(fi_close(&b->fid), 0);
  EXPECT_EQ(fi_close(&received->fid), 0);
  wait(3);  // b's receive completions also went to the CQ
}

TEST_F(Fabric, av__insert_lookup_straddr_remove) {
  fid_ep* a = endpoint();
  (void)a;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(4800);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t x = 0;
  ASSERT_EQ(fi_av_insert(av, &sin, 1, &x, 0, nullptr), 1);
  sockaddr_in back{};
  size_t len = sizeof(back);
  ASSERT_EQ(fi_av_lookup(av, x, &back, &len), 0);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(back.sin_port, sin.sin_port);
  char text[64];
  size_t tlen = sizeof(text);
  fi_av_straddr(av, &sin, text, &tlen);
  EXPECT_EQ(std::string(text), "spray://127.0.0.1:4800");
  ASSERT_EQ(fi_av_remove(av, &x, 1, 0), 0);
  EXPECT_EQ(fi_av_lookup(av, x, &back, &len), -FI_ENOENT);
  EXPECT_EQ(fi_av_remove(av, &x, 1, 0), -FI_EINVAL);
  fi_addr_t y = 0;
  ASSERT_EQ(fi_av_insertsvc(av, "127.0.0.1", "4816", &y, 0, nullptr), 1);
  EXPECT_NE(y, x);  // removed entries are never reused
}

TEST_F(Fabric, misuse__gets_clear_errors_not_crashes) {
  fid_ep* a = endpoint();
  char buf[8] = {};
  EXPECT_EQ(fi_send(a, buf, 8, nullptr, 12345, nullptr), -FI_EINVAL);  // no such fi_addr
  EXPECT_EQ(fi_send(a, nullptr, 8, nullptr, addrs[0], nullptr), -FI_EINVAL);
  fi_msg_tagged m{};
  iovec iov{buf, 8};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  EXPECT_EQ(fi_trecvmsg(a, &m, FI_ATOMIC), -FI_EBADFLAGS);  // not a receive flag
  EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY);             // children still open
  fid_ep* unenabled = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &unenabled, nullptr), 0);
  EXPECT_EQ(fi_send(unenabled, buf, 8, nullptr, addrs[0], nullptr), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_enable(unenabled), -FI_ENOAV);
  EXPECT_EQ(fi_connect(unenabled, buf, nullptr, 0), -FI_EOPNOTSUPP);
  size_t v = 64;
  EXPECT_EQ(fi_setopt(&unenabled->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)), 0);
  size_t got = 0, len = sizeof(got);
  EXPECT_EQ(fi_getopt(&unenabled->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &len), 0);
  EXPECT_EQ(got, 64u);
  EXPECT_EQ(fi_close(&unenabled->fid), 0);
}

// Memory that cannot be had fails fi_endpoint with an error, not the process: a child
// with its address space capped a few MiB above what it uses asks for an endpoint (its
// packet buffers alone are tens of MiB).
TEST_F(Fabric, out_of_memory__fails_the_endpoint_open_not_the_process) {
  if (!spray::test::kCappedChildWorks) GTEST_SKIP() << "a sanitizer build cannot cap memory";
  const spray::test::ChildEnd end = spray::test::run_in_capped_child(rlim_t{8} << 20, [&] {
    fid_ep* ep = nullptr;
    return fi_endpoint(domain, info, &ep, nullptr) < 0 ? 0 : 1;
  });
  ASSERT_TRUE(end.exited) << end.describe();
  EXPECT_EQ(end.code, 0) << "1: the endpoint opened; " << spray::test::kEscapedException
                         << ": an exception left fi_endpoint; " << spray::test::kCapFailed
                         << ": setrlimit failed";
}

TEST_F(Fabric, dead_peer__sends_complete_in_error_not_hang) {
  fid_ep* a = endpoint();
  sockaddr_in nobody{};
  nobody.sin_family = AF_INET;
  nobody.sin_port = htons(9);  // discard port: nothing of ours listens there
  nobody.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t dead = 0;
  ASSERT_EQ(fi_av_insert(av, &nobody, 1, &dead, 0, nullptr), 1);
  char buf[100] = {};
  ASSERT_EQ(fi_send(a, buf, sizeof(buf), nullptr, dead, buf), 0);
  fi_cq_err_entry err = wait_error();
  EXPECT_EQ(err.err, FI_EHOSTUNREACH);
  EXPECT_EQ(err.op_context, buf);
}

struct DgramFabric : Fabric {
  void SetUp() override { open(FI_EP_DGRAM, FI_MSG); }
};

TEST_F(DgramFabric, datagrams__arrive_and_oversized_ones_are_refused) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  char in[64] = {};
  ASSERT_EQ(fi_recv(b, in, sizeof(in), nullptr, FI_ADDR_UNSPEC, in), 0);
  ASSERT_EQ(fi_send(a, "datagram", 9, nullptr, addrs[1], nullptr), 0);
  wait(2);
  EXPECT_EQ(std::string(in), "datagram");
  // The largest datagram fi_getinfo promises arrives whole (also under TSS, whose header
  // and tag take room from each packet); one byte more is refused.
  std::vector<char> largest(info->ep_attr->max_msg_size), got(largest.size() + 1, 0);
  for (size_t i = 0; i < largest.size(); ++i) largest[i] = static_cast<char>(i * 7 + 1);
  ASSERT_EQ(fi_recv(b, got.data(), got.size(), nullptr, FI_ADDR_UNSPEC, got.data()), 0);
  ASSERT_EQ(fi_send(a, largest.data(), largest.size(), nullptr, addrs[1], nullptr), 0);
  wait(2);
  EXPECT_TRUE(std::equal(largest.begin(), largest.end(), got.begin()));
  std::vector<char> big(info->ep_attr->max_msg_size + 1);
  EXPECT_EQ(fi_send(a, big.data(), big.size(), nullptr, addrs[1], nullptr), -FI_EMSGSIZE);
  EXPECT_EQ(fi_tsend(a, in, 1, nullptr, addrs[1], 0, nullptr), -FI_ENOSYS);
}

}  // namespace
}  // namespace spray_fi_test
