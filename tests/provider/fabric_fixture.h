// The shared fixture of the `spray` provider conformance tests: a fabric, domain, AV
// (FI_AV_TABLE) and tagged-format CQ opened through the public libfabric API, endpoints
// on loopback entered into the AV, and helpers that wait for completions.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace spray_fi_test {

constexpr uint32_t kVersion = FI_VERSION(1, 17);

inline fi_info* hints_for(fi_ep_type type, uint64_t caps) {
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup("spray");
  h->ep_attr->type = type;
  h->caps = caps;
  return h;
}

// fi_getinfo with these hints (freed) at this API version; nullptr when nothing matched.
inline fi_info* getinfo(fi_info* hints, uint32_t version = kVersion) {
  fi_info* info = nullptr;
  const int rc = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  return rc == 0 ? info : nullptr;
}

struct Fabric : ::testing::Test {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  std::vector<fid_ep*> eps;
  std::vector<fi_addr_t> addrs;
  fi_wait_obj cq_wait = FI_WAIT_UNSPEC;            // set before open()
  fi_progress data_progress = FI_PROGRESS_UNSPEC;  // set before open()
  uint32_t api_version = kVersion;                 // set before open()

  void SetUp() override { open(FI_EP_RDM, FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE); }
  void open(fi_ep_type type, uint64_t caps, int mr_mode = 0) {
    fi_info* hints = hints_for(type, caps);
    hints->domain_attr->mr_mode = mr_mode;
    hints->domain_attr->data_progress = data_progress;
    info = getinfo(hints, api_version);
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    ASSERT_EQ(fi_av_open(domain, &av_attr, &av, nullptr), 0);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.wait_obj = cq_wait;
    ASSERT_EQ(fi_cq_open(domain, &cq_attr, &cq, nullptr), 0);
  }
  // An enabled endpoint bound to the AV and CQ (and to `cntr` for `cntr_events`), its
  // address entered into the AV (addrs[] follows eps[]).
  fid_ep* endpoint(fid_cntr* cntr = nullptr, uint64_t cntr_events = 0) {
    if (!cntr) return endpoint_counting({});
    return endpoint_counting({{cntr, cntr_events}});
  }
  // The same, bound to each of `counters` for its events.
  fid_ep* endpoint_counting(std::initializer_list<std::pair<fid_cntr*, uint64_t>> counters) {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    for (const auto& [cntr, events] : counters) {
      EXPECT_EQ(fi_ep_bind(ep, &cntr->fid, events), 0);
    }
    EXPECT_EQ(fi_enable(ep), 0);
    char name[64];
    size_t len = sizeof(name);
    EXPECT_EQ(fi_getname(&ep->fid, name, &len), 0);
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(av, name, 1, &a, 0, nullptr), 1);
    eps.push_back(ep);
    addrs.push_back(a);
    return ep;
  }
  void TearDown() override {
    for (fid_ep* ep : eps) EXPECT_EQ(fi_close(&ep->fid), 0);
    for (fid* f : {cq ? &cq->fid : nullptr, av ? &av->fid : nullptr,
                   domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
    fi_freeinfo(info);
  }
  // Reads `n` completions (errors fail the test) within 10 s.
  std::vector<fi_cq_tagged_entry> wait(size_t n, std::vector<fi_addr_t>* from = nullptr) {
    std::vector<fi_cq_tagged_entry> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e[8];
      fi_addr_t src[8];
      const ssize_t r = fi_cq_readfrom(cq, e, 8, src);
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ADD_FAILURE() << "error completion: " << fi_strerror(err.err);
        break;
      }
      for (ssize_t i = 0; i < r; ++i) {
        out.push_back(e[i]);
        if (from) from->push_back(src[i]);
      }
    }
    EXPECT_EQ(out.size(), n);
    return out;
  }
  // The first error completion within 10 s.
  fi_cq_err_entry wait_error() {
    fi_cq_err_entry err{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      if (r == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) return err;
      EXPECT_TRUE(r == -FI_EAGAIN) << "unexpected completion";
    }
    ADD_FAILURE() << "no error completion";
    return err;
  }
};

// The fixture with memory registration: regions it registers are closed at teardown.
struct RegisteringFabric : Fabric {
  fid_mr* reg(void* buf, size_t len, uint64_t access, uint64_t key = 0) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, access, 0, key, 0, &mr, nullptr), 0);
    if (mr) mrs.push_back(mr);
    return mr;
  }
  // The address a peer names for byte `offset` of `buf` (virtual or offset addressing,
  // as the domain's mr_mode says).
  uint64_t remote(const void* buf, size_t offset = 0) const {
    const bool virt = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    return (virt ? reinterpret_cast<uintptr_t>(buf) : 0) + offset;
  }
  void TearDown() override {
    for (fid_mr* mr : mrs) EXPECT_EQ(fi_close(&mr->fid), 0);
    Fabric::TearDown();
  }
  std::vector<fid_mr*> mrs;
};

// An endpoint in a domain of its own, with its own AV and CQ, on the fixture's fabric and
// info: reading its CQ progresses it alone (with manual progress), so a test can see what
// an endpoint of the fixture's domain has put on the wire without progressing that one.
struct SeparateDomain {
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;

  fi_addr_t address = FI_ADDR_NOTAVAIL;  // this endpoint in the near side's AV
  fi_addr_t near = FI_ADDR_NOTAVAIL;     // the near side's endpoint in this AV

  // Opens it and enters each side's address into the other's AV. False on any failure.
  bool open(fid_fabric* fabric, fi_info* info, fid_av* near_av, fid_ep* near_ep) {
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    if (fi_domain(fabric, info, &domain, nullptr) != 0 ||
        fi_av_open(domain, &av_attr, &av, nullptr) != 0 ||
        fi_cq_open(domain, &cq_attr, &cq, nullptr) != 0 ||
        fi_endpoint(domain, info, &ep, nullptr) != 0 || fi_ep_bind(ep, &av->fid, 0) != 0 ||
        fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) != 0 || fi_enable(ep) != 0) {
      return false;
    }
    return enter(ep, near_av, address) && enter(near_ep, av, near);
  }
  // Polls this CQ (progressing this domain only) until it has read `want` completions or
  // `ms` milliseconds have passed; the completions it read, or -1 after an error one.
  int poll(int want, int ms) {
    int read = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (read < want && std::chrono::steady_clock::now() < end) {
      fi_cq_tagged_entry e[8];
      const ssize_t r = fi_cq_read(cq, e, 8);
      if (r == -FI_EAVAIL) return -1;
      if (r > 0) read += static_cast<int>(r);
    }
    return read;
  }
  ~SeparateDomain() {
    for (fid* f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr,
                   domain ? &domain->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
  }

 private:
  static bool enter(fid_ep* from, fid_av* into, fi_addr_t& out) {
    char name[64];
    size_t len = sizeof(name);
    return fi_getname(&from->fid, name, &len) == 0 &&
           fi_av_insert(into, name, 1, &out, 0, nullptr) == 1;
  }
};

// Whether manual progress is strict in this run: FI_SPRAY_STANDBY_PROGRESS_MS=0 turns off
// the thread that otherwise progresses a domain whose application makes no call for a
// while (provider/progress_thread.h). Tests that watch what does not happen without
// calls need it off; tests of the standby thread need it on.
inline bool strict_manual_progress() {
  const char* v = std::getenv("FI_SPRAY_STANDBY_PROGRESS_MS");
  return v != nullptr && *v != '\0' && std::atoi(v) <= 0;
}
#define SKIP_UNLESS_STRICT_MANUAL_PROGRESS()                                                \
  if (!strict_manual_progress())                                                            \
  GTEST_SKIP() << "runs with FI_SPRAY_STANDBY_PROGRESS_MS=0 (ctest "                        \
                  "provider_strict_manual_progress_*): here the standby thread progresses " \
                  "a domain whose application makes no call"
#define SKIP_IF_STRICT_MANUAL_PROGRESS() \
  if (strict_manual_progress()) GTEST_SKIP() << "the standby thread is off here"

// Whether senders in this run are patient: provider_test_main.cc gives up on a silent
// peer after 4 retries of at most 5 ms (about 17 ms), so that the dead-peer tests end
// quickly. A peer answered only by its standby thread needs that thread scheduled within
// those 17 ms, which a loaded 2-core machine does not promise (under ASan with two busy
// processes beside it, 7 sends in 20 failed "peer unreachable"). Tests that depend on
// such a peer run with the provider's own patience (ctest provider_patient_peers_*).
inline bool patient_peers() {
  const char* v = std::getenv("FI_SPRAY_RETRIES");
  return v != nullptr && std::atoi(v) >= 16;
}
#define SKIP_UNLESS_PATIENT_PEERS()                                                         \
  if (!patient_peers())                                                                     \
  GTEST_SKIP() << "runs with FI_SPRAY_RETRIES=16 (ctest provider_patient_peers_*): here a " \
                  "peer that only a standby thread answers may be taken for dead"

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return v;
}

}  // namespace spray_fi_test
