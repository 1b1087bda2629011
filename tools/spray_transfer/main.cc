// spray-transfer: runs engines over the emulated fabric and reports what happened.
//
// Every host sends `--messages` messages of `--bytes` to the next host (a ring), or to
// every other host in turn (`--all-to-all`), over
// a fabric with the chosen faults, in virtual time; each host issues its own messages in
// order, whatever holds up the others. It checks every received byte and
// prints delivered bytes, retransmissions, fabric events and throughput (virtual-time
// goodput, and wall-clock rate of the simulation itself). Exit status 0 only if every
// message arrived intact and PDS never reported on a message that had already ended.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include "nic_sim/cluster.h"
#include "tools/common/byte_pattern.h"

namespace {

using namespace spray;

struct Options {
  uint32_t hosts = 2;
  uint32_t paths = 4;
  uint64_t bytes = 1 << 20;
  uint32_t messages = 64;
  double loss = 0.01;
  double reorder = 0.05;
  double duplicate = 0.01;
  double corrupt = 0.001;
  double trim = 0.0;
  bool path_down = false;
  std::string cc = "nscc";
  std::string path_selection = "reps";
  uint64_t seed = 1;
  double link_gbps = 100;
  uint32_t max_pdcs = 1024;  // per engine; a few force idle PDCs to close for room
  // SES message table sizes (tx and rx) per engine; a few make targets refuse requests
  // for want of room (NO_SES_MSG_AVAIL) and senders wait for slots.
  uint32_t message_slots = ses::SesConfig{}.max_rx_messages;
  bool all_to_all = false;
  // What moves each message: a tagged send; an RMA write by the sender into the
  // receiver's registered buffer; an RMA read by the receiver from the sender's; or each
  // of the three in turn (message m by m % 3).
  std::string operation = "send";
  // "per-host": each host issues its own messages, whatever holds up the others.
  // "global": one order over all hosts' messages, host 0's first, stopping at the first
  // kAgain; the only order before 2026-11-28, kept so that seeds found then replay.
  std::string issue_order = "per-host";
  // Sends go as injects (nothing awaits their completion), each host's one at a time: a
  // lone packet then goes alone on its established PDC without ACK-requested, and its
  // receiver holds the ACK for what it sends next (pds::TxRun::ack_may_wait), so held ACKs and
  // the timeouts that are no loss meet the fabric's faults.
  bool inject = false;
  bool json = false;
};

enum class Operation : uint8_t { kSend, kWrite, kRead };

}  // namespace

// How long a run may take in virtual time before the operations still open count as
// never ending (exit status 2).
constexpr int64_t kTimeLimitSeconds = 60;

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"spray-transfer: Spray engines over an emulated lossy multipath fabric"};
  app.footer(fmt::format(
      "Exit status: 0 when every message arrived intact; 1 when every operation ended but some "
      "with an error (e.g. peer unreachable); 2 when some had not ended after {} s of virtual "
      "time; 3 when PDS reported on a message SES had already ended (stale tickets: a bug).",
      kTimeLimitSeconds));
  app.add_option("--hosts", o.hosts, "hosts, each sending to the next (a ring)")
      ->check(CLI::Range(2, 64));
  app.add_option("--paths", o.paths, "equal-cost paths between hosts")->check(CLI::Range(1, 256));
  app.add_option("--bytes", o.bytes, "bytes per message")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30));
  app.add_option("--messages", o.messages, "messages per host");
  app.add_option("--loss", o.loss, "packet loss probability")->check(CLI::Range(0.0, 0.9));
  app.add_option("--reorder", o.reorder, "probability a packet is delayed")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--duplicate", o.duplicate, "duplication probability")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--corrupt", o.corrupt, "bit-corruption probability")->check(CLI::Range(0.0, 1.0));
  app.add_option("--trim", o.trim, "random trimming probability")->check(CLI::Range(0.0, 1.0));
  app.add_flag("--path-down", o.path_down,
               "take path 0 down once a quarter of the messages arrived");
  app.add_option("--cc", o.cc, "congestion control: nscc | fixed");
  app.add_option("--path-selection", o.path_selection,
                 "reps | oblivious | ecmp | ecmp_repath | bitmap");
  app.add_option("--seed", o.seed, "seed for faults, PSNs and path choices");
  app.add_option("--link-gbps", o.link_gbps, "rate of every link");
  app.add_option("--max-pdcs", o.max_pdcs,
                 "PDCs each engine may hold (a host talks to 2 peers in the ring, to all in "
                 "--all-to-all; fewer PDCs than that make it close idle ones for room)")
      ->check(CLI::Range(2, 32768));
  app.add_option("--message-slots", o.message_slots,
                 "SES message slots each engine has for sends and for receives (an eighth of "
                 "each is kept for answers and in-order sends)")
      ->check(CLI::Range(4, 65536));
  app.add_flag("--all-to-all", o.all_to_all,
               "each host sends its messages to every other host in turn, not to the next");
  app.add_option("--operation", o.operation,
                 "send | write (RMA, by the sender) | read (RMA, by the receiver) | mixed (each "
                 "in turn)")
      ->check(CLI::IsMember({"send", "write", "read", "mixed"}));
  auto* issue_order =
      app.add_option("--issue-order", o.issue_order,
                     "per-host (each host issues its messages whatever holds up the others) | "
                     "global (one order over all hosts; a full message table stops everyone)")
          ->check(CLI::IsMember({"per-host", "global"}));
  app.add_flag("--inject", o.inject,
               "sends go as injects (no completion awaited), each host's one at a time, so "
               "that a lone packet asks for no ACK and its receiver holds the ACK")
      ->excludes(issue_order);
  app.add_flag("--json", o.json, "print the result as JSON");
  CLI11_PARSE(app, argc, argv);

  sim::FabricConfig f;
  f.hosts = o.hosts;
  f.paths = o.paths;
  f.seed = o.seed;
  f.host_link.gbps = o.link_gbps;
  f.path_link.gbps = o.link_gbps / 2;  // spraying needs several paths to fill a host link
  f.faults = {.loss = o.loss,
              .duplicate = o.duplicate,
              .corrupt = o.corrupt,
              .reorder = o.reorder,
              .trim = o.trim};
  engine::EngineConfig e;
  e.pds.cc_name = o.cc;
  e.pds.path_name = o.path_selection;
  e.pds.cc.line_rate_gbps = o.link_gbps;
  e.pds.max_pdcs = o.max_pdcs;
  e.ses.max_tx_messages = o.message_slots;
  e.ses.max_rx_messages = o.message_slots;
  if (!cc::make_congestion_control(o.cc, {}) || !paths::make_path_selector(o.path_selection, {})) {
    fmt::print(stderr, "unknown --cc or --path-selection\n");
    return 2;
  }
  sim::Cluster cluster(f, e);

  const uint64_t total_messages = uint64_t{o.hosts} * o.messages;
  // Where message m goes: host m / messages sends it to the next host, or in
  // --all-to-all to the others in turn.
  const auto sender_of = [&](uint64_t m) { return static_cast<uint32_t>(m / o.messages); };
  const auto receiver_of = [&](uint64_t m) {
    const uint64_t step = o.all_to_all ? 1 + (m % o.messages) % (o.hosts - 1) : 1;
    return static_cast<uint32_t>((sender_of(m) + step) % o.hosts);
  };
  const auto operation_of = [&](uint64_t m) {
    if (o.operation == "mixed") return static_cast<Operation>(m % 3);
    return o.operation == "write"  ? Operation::kWrite
           : o.operation == "read" ? Operation::kRead
                                   : Operation::kSend;
  };
  // An RMA message's buffer is a region of its own, keyed by the message: the receiver's
  // dst for a write, the sender's src for a read.
  const auto key_of = [](uint64_t m) { return m + 1; };
  std::vector<std::vector<uint8_t>> src(total_messages), dst(total_messages);
  for (uint64_t m = 0; m < total_messages; ++m) {
    src[m].resize(o.bytes);
    spray::tools::fill_pattern(src[m], m);
    dst[m].assign(o.bytes, 0);
    Status s = Status::kOk;
    switch (operation_of(m)) {
      case Operation::kSend:
        s = cluster.engine(receiver_of(m))
                .post_recv({dst[m].data(), o.bytes, m, true, m, 0, sender_of(m)});
        break;
      case Operation::kWrite:
        s = cluster.engine(receiver_of(m))
                .register_memory({dst[m].data(), o.bytes, 0, key_of(m), ses::access::kRemoteWrite});
        break;
      case Operation::kRead:
        s = cluster.engine(sender_of(m))
                .register_memory({src[m].data(), o.bytes, 0, key_of(m), ses::access::kRemoteRead});
        break;
    }
    if (s != Status::kOk) {
      fmt::print(stderr, "could not post the receive or register the region of message {}: {}\n", m,
                 to_string(s));
      return 1;
    }
  }
  // What became of each message's send and receive. A receive whose send failed never
  // completes (nothing comes for it; posted receives wait, as in MPI), so a message has
  // ended once its send ended and, if that succeeded, its receive too. An RMA message has
  // one completion, its initiator's, kept as its send's end; its receive "ends" with it.
  enum class End : uint8_t { kOpen, kOk, kError };
  std::vector<End> send_end(total_messages, End::kOpen), recv_end(total_messages, End::kOpen);
  const auto ended = [&](uint64_t m) {
    return send_end[m] == End::kError || (send_end[m] == End::kOk && recv_end[m] != End::kOpen);
  };
  uint64_t received_ok = 0, errors = 0, ended_messages = 0;
  // Each host issues its own messages in order, independently of the others, as the
  // ranks of a real job would: a host whose engine answers kAgain (its message table is
  // full) waits for its next turn, and the other hosts go on issuing. Turns rotate, so
  // that no host's operations always come first at an engine two hosts share (a read is
  // issued by its message's receiver).
  std::vector<uint64_t> next_of(o.hosts);
  for (uint32_t h = 0; h < o.hosts; ++h) next_of[h] = uint64_t{h} * o.messages;
  uint32_t first_turn = 0;
  const bool global_order = o.issue_order == "global";
  uint64_t next_global = 0;  // --issue-order global
  const auto issue = [&](uint64_t m) {
    const uint32_t from = sender_of(m), to = receiver_of(m);
    switch (operation_of(m)) {
      case Operation::kSend:
        return cluster.engine(from).send(
            to, src[m].data(), o.bytes, m,
            {.tagged = true, .tag = m, .completion_awaited = !o.inject});
      case Operation::kWrite:
        return cluster.engine(from).write(to, src[m].data(), o.bytes, 0, key_of(m), m);
      case Operation::kRead:
        return cluster.engine(to).read(from, dst[m].data(), o.bytes, 0, key_of(m), m);
    }
    return Status::kInvalidArgument;
  };
  const auto wall_start = std::chrono::steady_clock::now();
  const bool finished = cluster.run_until(
      [&] {
        if (o.path_down && received_ok >= total_messages / 4 && cluster.fabric().path_up(0)) {
          cluster.fabric().set_path_up(0, false);
        }
        if (global_order) {
          while (next_global < total_messages && issue(next_global) == Status::kOk) ++next_global;
        } else {
          for (uint32_t turn = 0; turn < o.hosts; ++turn) {
            const uint32_t h = (first_turn + turn) % o.hosts;
            const uint64_t first = uint64_t{h} * o.messages, end = first + o.messages;
            // --inject: one at a time, the next once the previous send has ended.
            const auto previous_open = [&] {
              return o.inject && next_of[h] > first && send_end[next_of[h] - 1] == End::kOpen;
            };
            while (next_of[h] < end && !previous_open() && issue(next_of[h]) == Status::kOk) {
              ++next_of[h];
            }
          }
          first_turn = (first_turn + 1) % o.hosts;
        }
        for (uint32_t h = 0; h < o.hosts; ++h) {
          ses::Completion c;
          while (cluster.engine(h).poll_completion(c)) {
            const uint64_t m = c.context;
            const bool was_ended = ended(m);
            const bool is_recv = c.op == ses::OpKind::kTaggedRecv;
            const bool is_rma = c.op == ses::OpKind::kWrite || c.op == ses::OpKind::kRead;
            if (c.status != Status::kOk) {
              ++errors;
              const char* what = is_recv                       ? "receive"
                                 : c.op == ses::OpKind::kWrite ? "write"
                                 : c.op == ses::OpKind::kRead  ? "read"
                                                               : "send";
              fmt::print(stderr, "host {}: {} {} failed: {}\n", h, what, m, to_string(c.status));
            } else if (is_recv || is_rma) {
              received_ok += c.length == o.bytes && dst[m] == src[m];
            }
            const End end = c.status == Status::kOk ? End::kOk : End::kError;
            (is_recv ? recv_end : send_end)[m] = end;
            if (is_rma) recv_end[m] = end;
            ended_messages += !was_ended && ended(m);
          }
        }
        return ended_messages == total_messages;
      },
      Duration::seconds(kTimeLimitSeconds));
  if (!finished) {
    uint32_t named = 0;
    for (uint64_t m = 0; m < total_messages && named < 10; ++m) {
      if (ended(m)) continue;
      ++named;
      fmt::print(stderr, "message {} (host {} to {}) never ended: send {}, receive {}\n", m,
                 sender_of(m), receiver_of(m), send_end[m] == End::kOpen ? "open" : "ended",
                 recv_end[m] == End::kOpen ? "open" : "ended");
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  uint64_t tx = 0, rtx = 0, timeouts = 0, pdcs_opened = 0, pdcs_reclaimed = 0, pdcs_failed = 0,
           pdcs_reopened = 0, pdcs_remembering = 0, stale_tickets = 0, acks_held = 0,
           receives_abandoned = 0, missing_ids_passed_over = 0, writes_abandoned = 0;
  for (uint32_t h = 0; h < o.hosts; ++h) {
    stale_tickets += cluster.engine(h).ses().stats().stale_tickets;
    // Sends received in part whose sender then failed (Ses::end_sends_of).
    receives_abandoned += cluster.engine(h).ses().stats().receives_abandoned;
    // Send ids of a failed sender that never came, passed over (Ses::pass_over_missing_ids).
    missing_ids_passed_over += cluster.engine(h).ses().stats().missing_ids_passed_over;
    writes_abandoned += cluster.engine(h).ses().stats().writes_abandoned;
    const auto& s = cluster.engine(h).pds().stats();
    tx += s.tx_packets;
    rtx += s.retransmits;
    timeouts += s.timeouts;
    pdcs_opened += s.pdcs_opened;
    pdcs_reclaimed += s.pdcs_reclaimed;  // ours closed for room, or at a full peer's request
    pdcs_failed += s.pdcs_failed;
    pdcs_reopened += s.pdcs_reopened;  // a peer's PDC it had failed, ours in its place
    pdcs_remembering += s.pdcs_with_remembered_paths;
    acks_held += s.acks_held;
  }
  const auto& fs = cluster.fabric().stats();
  const uint64_t delivered = received_ok * o.bytes;
  const double virtual_s = (cluster.now() - Time{}).as_seconds();
  const double goodput_gbps =
      virtual_s > 0 ? static_cast<double>(delivered) * 8.0 / virtual_s / 1e9 : 0;
  const bool ok = finished && errors == 0 && received_ok == total_messages;
  // Sends that completed OK while their receive failed: the two ends disagree on what
  // became of the message, which no fault may cause (the other way round may happen: a
  // send whose ACKs were lost fails though its message arrived whole).
  uint64_t disagreements = 0;
  for (uint64_t m = 0; m < total_messages; ++m) {
    disagreements += operation_of(m) == Operation::kSend && send_end[m] == End::kOk &&
                     recv_end[m] == End::kError;
  }

  if (o.json) {
    nlohmann::json j = {{"ok", ok},
                        {"every_operation_ended", finished},
                        {"errors", errors},
                        {"stale_tickets", stale_tickets},
                        {"sends_ok_whose_receive_failed", disagreements},
                        {"messages", total_messages},
                        {"bytes_per_message", o.bytes},
                        {"delivered_bytes", delivered},
                        {"data_packets_sent", tx},
                        {"retransmissions", rtx},
                        {"timeouts", timeouts},
                        {"acks_held", acks_held},
                        {"receives_abandoned_by_a_failed_sender", receives_abandoned},
                        {"missing_ids_of_a_failed_sender_passed_over", missing_ids_passed_over},
                        {"writes_abandoned_by_a_failed_initiator", writes_abandoned},
                        {"pdcs",
                         {{"opened", pdcs_opened},
                          {"started_on_remembered_paths", pdcs_remembering},
                          {"closed_for_room", pdcs_reclaimed},
                          {"failed", pdcs_failed},
                          {"reopened_after_the_peer_failed_them", pdcs_reopened}}},
                        {"fabric",
                         {{"lost", fs.lost},
                          {"duplicated", fs.duplicated},
                          {"fcs_drops", fs.dropped_fcs},
                          {"trimmed", fs.trimmed},
                          {"ecn_marked", fs.ecn_marked},
                          {"path_down_drops", fs.dropped_path_down},
                          {"path_packets", fs.path_packets}}},
                        {"virtual_seconds", virtual_s},
                        {"goodput_gbps", goodput_gbps},
                        {"wall_seconds", wall}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("spray-transfer: {} hosts, {} paths, {} x {} B per host, cc={} paths={} seed={}\n",
               o.hosts, o.paths, o.messages, o.bytes, o.cc, o.path_selection, o.seed);
    fmt::print("  delivered      {} of {} messages intact, {} bytes\n", received_ok, total_messages,
               delivered);
    fmt::print("  data packets   {} sent, {} retransmitted ({:.2f}%), {} timeouts\n", tx, rtx,
               tx ? 100.0 * static_cast<double>(rtx) / static_cast<double>(tx) : 0.0, timeouts);
    fmt::print("  ACKs held      {} (to the receiver's next step: --inject)\n", acks_held);
    fmt::print(
        "  abandoned      {} sends and {} RMA writes received in part, their sender failed; {} "
        "of its send ids that never came passed over\n",
        receives_abandoned, writes_abandoned, missing_ids_passed_over);
    fmt::print(
        "  PDCs           {} opened ({} on paths a closed one found good), {} closed for room, {} "
        "failed, {} reopened (their initiator had failed them)\n",
        pdcs_opened, pdcs_remembering, pdcs_reclaimed, pdcs_failed, pdcs_reopened);
    fmt::print(
        "  fabric         lost {}, duplicated {}, corrupted(FCS) {}, trimmed {}, ECN {}, path-down "
        "{}\n",
        fs.lost, fs.duplicated, fs.dropped_fcs, fs.trimmed, fs.ecn_marked, fs.dropped_path_down);
    fmt::print("  per path       {}\n", fmt::join(fs.path_packets, " "));
    fmt::print("  stale tickets  {} (PDS reports for messages already ended; must be 0)\n",
               stale_tickets);
    fmt::print("  disagreements  {} (sends completed OK whose receive failed; must be 0)\n",
               disagreements);
    fmt::print(
        "  throughput     {:.2f} Gbit/s goodput in {:.3f} ms virtual time; simulated in {:.2f} s "
        "wall\n",
        goodput_gbps, virtual_s * 1e3, wall);
    fmt::print("  result         {}\n",
               ok         ? "OK: every byte delivered exactly once, intact"
               : finished ? fmt::format("FAILED: {} operations ended with an error", errors)
                          : fmt::format("FAILED: not every operation ended within {} s of "
                                        "virtual time",
                                        kTimeLimitSeconds));
  }
  // 0: all intact; 1: every operation ended, some with an error; 2: some never ended;
  // 3: PDS reported on a message SES had already ended (Ses::ticket dropped the report,
  // but PDS and SES disagreed on what is in flight: a bug, whatever else happened);
  // 4: a send completed OK whose receive failed (the two ends disagree: a bug too).
  if (!finished) return 2;
  if (stale_tickets != 0) return 3;
  if (disagreements != 0) return 4;
  return ok ? 0 : 1;
}
