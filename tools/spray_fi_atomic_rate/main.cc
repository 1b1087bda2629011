// spray-fi-atomic-rate: the rate of remote fetch-and-add of any libfabric provider, and
// with --window 1 its latency (one atomic's round trip).
//
// One process, two RDM endpoints in domains of their own: the main thread posts
// fi_fetch_atomic(FI_SUM, FI_UINT64, 1) on one 64-bit word the other endpoint registered,
// keeping at most --window outstanding; a second thread drives the target's progress
// (it reads its CQ, as a target process with manual progress does). Each fetched value
// is checked: the values are 0, 1, ... each exactly once, and the word ends at the
// number of operations, so the rate is of atomics applied exactly once. Prints one line:
// microseconds an atomic and atomics a second over the last 90 % of the run.
//
// Usage: spray-fi-atomic-rate [--provider P] [--ops N] [--window N]
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "provider/client/rdm_endpoint.h"

namespace {

using Clock = std::chrono::steady_clock;
using spray::fi_client::RdmEndpoint;
constexpr auto kTimeout = std::chrono::seconds(60);  // a run that takes longer fails
constexpr uint64_t kKey = 7;  // the word's memory key (mr_mode 0: the application's choice)

[[noreturn]] void fail(const std::string& why) {
  throw std::runtime_error(why);
}

std::unique_ptr<RdmEndpoint> open_side(const std::string& provider, size_t window) {
  spray::fi_client::RdmEndpointSpec spec;
  spec.provider = provider;
  spec.caps = FI_ATOMIC;
  spec.cq_entries = 2 * window;
  spec.described = "RDM endpoint with FI_ATOMIC";
  std::string error;
  auto side = RdmEndpoint::open(spec, error);
  if (!side) fail(error);
  return side;
}

// Completions read now into `done` (contexts); an error completion fails the run.
size_t poll(const RdmEndpoint& side, std::vector<void*>* done) {
  fi_cq_tagged_entry entries[32];
  const ssize_t n = fi_cq_read(side.cq(), entries, 32);
  if (n == -FI_EAGAIN) return 0;
  if (n < 0) {
    fi_cq_err_entry err{};
    fi_cq_readerr(side.cq(), &err, 0);
    fail(fmt::format("error completion: {}", fi_strerror(err.err)));
  }
  for (ssize_t i = 0; done && i < n; ++i) done->push_back(entries[i].op_context);
  return static_cast<size_t>(n);
}

int run(const std::string& provider, uint64_t ops, size_t window) {
  alignas(8) uint64_t word = 0;  // the target's, outlives both endpoints
  std::vector<uint64_t> fetched(ops, ~uint64_t{0});
  auto initiator = open_side(provider, window);
  auto target = open_side(provider, window);
  fid_mr* mr = nullptr;
  if (const int rc = fi_mr_reg(target->domain(), &word, sizeof word,
                               FI_REMOTE_READ | FI_REMOTE_WRITE, 0, kKey, 0, &mr, nullptr);
      rc != 0) {
    fail(fmt::format("fi_mr_reg: {}", fi_strerror(-rc)));
  }
  // Addressed as the provider's mr_mode says: the virtual address, or an offset (0).
  const uint64_t address = (target->info().domain_attr->mr_mode & FI_MR_VIRT_ADDR)
                               ? reinterpret_cast<uintptr_t>(&word)
                               : 0;
  const uint64_t key = fi_mr_key(mr);
  if (target->info().domain_attr->mr_mode & FI_MR_ENDPOINT) {
    int rc = fi_mr_bind(mr, &target->ep()->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      fi_close(&mr->fid);
      fail(fmt::format("fi_mr_bind/fi_mr_enable: {}", fi_strerror(-rc)));
    }
  }
  std::string error;
  const fi_addr_t to = initiator->enter(target->name(), error);
  if (to == FI_ADDR_NOTAVAIL) fail("fi_av_insert: " + error);
  target->enter(initiator->name(), error);

  std::atomic<bool> stop{false};
  std::string target_error;
  std::thread progress([&] {
    try {
      while (!stop.load(std::memory_order_relaxed)) poll(*target, nullptr);
    } catch (const std::exception& e) {
      target_error = e.what();
    }
  });

  const uint64_t one = 1;
  const uint64_t warmup = ops / 10;
  uint64_t posted = 0, completed = 0;
  Clock::time_point warm = Clock::now(), end = warm;
  std::vector<void*> done;
  const auto deadline = Clock::now() + kTimeout;
  try {
    while (completed < ops) {
      if (Clock::now() > deadline) {
        fail(fmt::format("{} of {} atomics done in time", completed, ops));
      }
      while (posted < ops && posted - completed < window) {
        const ssize_t rc =
            fi_fetch_atomic(initiator->ep(), &one, 1, nullptr, &fetched[posted], nullptr, to,
                            address, key, FI_UINT64, FI_SUM, &fetched[posted]);
        if (rc == -FI_EAGAIN) break;
        if (rc != 0) fail(fmt::format("fi_fetch_atomic: {}", fi_strerror(static_cast<int>(-rc))));
        ++posted;
      }
      done.clear();
      poll(*initiator, &done);
      for (size_t i = 0; i < done.size(); ++i) {
        if (++completed == warmup) warm = Clock::now();
      }
    }
    end = Clock::now();
  } catch (...) {
    stop = true;
    progress.join();
    fi_close(&mr->fid);
    throw;
  }
  stop = true;
  progress.join();
  fi_close(&mr->fid);
  if (!target_error.empty()) fail("target: " + target_error);
  // Exactly once: the word counts every atomic, and each value was handed out once.
  if (word != ops) fail(fmt::format("the word is {} after {} fetch-and-adds", word, ops));
  std::vector<bool> seen(ops, false);
  for (const uint64_t v : fetched) {
    if (v >= ops || seen[v]) fail(fmt::format("fetched value {} is out of range or repeated", v));
    seen[v] = true;
  }
  const double seconds = std::chrono::duration<double>(end - warm).count();
  const auto timed = static_cast<double>(ops - warmup);
  fmt::print("{} fetch-and-add window {}: {:.2f} us an atomic, {:.0f} atomics/s\n", provider,
             window, seconds / timed * 1e6, timed / seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string provider = "spray";
  uint64_t ops = 100000;
  size_t window = 1;
  CLI::App app{"Remote fetch-and-add rate (and, with --window 1, latency) of a libfabric provider"};
  app.add_option("--provider", provider, "libfabric provider name");
  app.add_option("--ops", ops, "atomics in all")->check(CLI::Range(10, 100000000));
  app.add_option("--window", window, "atomics outstanding at most")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(provider, ops, window);
  } catch (const std::exception& e) {
    fmt::print(stderr, "spray-fi-atomic-rate: {}\n", e.what());
    return 1;
  }
}
