// See plain_tcp_allreduce.h.
#include "tools/spray_dp_bench/plain_tcp_allreduce.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "tools/spray_dp_bench/loopback_tcp_listener.h"

namespace spray::tools {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStall = std::chrono::seconds(10);  // a step with no progress this long fails
// Untimed all-reduces first, so that new connections have opened their congestion
// windows and the buffers' pages are touched before the timing starts.
constexpr int kWarmUps = 10;

// One rank's view: its connection to the next rank (sends) and from the previous (receives).
struct Ring {
  int to_next = -1;
  int from_previous = -1;
};

// Sends `out` to the next rank while receiving `in` from the previous one, both whole.
// Non-blocking both ways, so two neighbours sending to each other cannot deadlock on full
// socket buffers. False on a closed connection or kStall without progress.
bool exchange(const Ring& ring, const uint8_t* out, size_t out_bytes, uint8_t* in,
              size_t in_bytes) {
  size_t sent = 0, received = 0;
  auto last_progress = Clock::now();
  while (sent < out_bytes || received < in_bytes) {
    pollfd p[2] = {{ring.to_next, static_cast<short>(sent < out_bytes ? POLLOUT : 0), 0},
                   {ring.from_previous, static_cast<short>(received < in_bytes ? POLLIN : 0), 0}};
    if (::poll(p, 2, 0) == 0) {  // nothing to do now: let the other ranks run
      if (Clock::now() - last_progress > kStall) return false;
      ::sched_yield();
      continue;
    }
    if (sent < out_bytes && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n =
          ::send(ring.to_next, out + sent, out_bytes - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN) return false;
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (received < in_bytes && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      const ssize_t n =
          ::recv(ring.from_previous, in + received, in_bytes - received, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
      if (n > 0) received += static_cast<size_t>(n);
    }
    last_progress = Clock::now();
  }
  return true;
}

// Chunk k of n values among `ranks`: [first(k), first(k + 1)).
size_t first(size_t k, size_t n, int ranks) {
  return k * n / static_cast<size_t>(ranks);
}

// What rank r puts in at element i, and so what the sum over ranks must be: small
// integers, exact in f32 whatever the order of the additions.
float input(int r, size_t i) {
  return static_cast<float>((static_cast<size_t>(r) + i) % 7);
}
float expected(int ranks, size_t i) {
  float sum = 0;
  for (int r = 0; r < ranks; ++r) sum += input(r, i);
  return sum;
}

// The ring all-reduce, out of place as MPI_Allreduce is timed (the input stays as it
// was, so iterations need no reset), as rank `rank` of `ranks`.
bool ring_allreduce(const Ring& ring, int rank, int ranks, const std::vector<float>& inputs,
                    std::vector<float>& outputs, std::vector<float>& scratch) {
  const size_t n = inputs.size();
  auto count_of = [&](size_t k) { return first(k + 1, n, ranks) - first(k, n, ranks); };
  auto bytes = [](const float* f) { return reinterpret_cast<const uint8_t*>(f); };
  auto in_chunk = [&](size_t k) { return inputs.data() + first(k, n, ranks); };
  auto out_chunk = [&](size_t k) { return outputs.data() + first(k, n, ranks); };
  const auto p = static_cast<size_t>(ranks);
  const auto me = static_cast<size_t>(rank);
  // Reduce-scatter: at step s a rank passes on the chunk it reduced at step s - 1 (its own
  // input at step 0) and adds its input to the one it receives; chunk me + 1 ends whole.
  for (size_t step = 0; step + 1 < p; ++step) {
    const size_t send = (me + p - step) % p, receive = (me + 2 * p - step - 1) % p;
    const float* out = step == 0 ? in_chunk(send) : out_chunk(send);
    if (!exchange(ring, bytes(out), count_of(send) * 4, reinterpret_cast<uint8_t*>(scratch.data()),
                  count_of(receive) * 4))
      return false;
    const float* mine = in_chunk(receive);
    float* into = out_chunk(receive);
    for (size_t i = 0, c = count_of(receive); i < c; ++i) into[i] = mine[i] + scratch[i];
  }
  // All-gather: whole chunks passed on around the ring.
  for (size_t step = 0; step + 1 < p; ++step) {
    const size_t send = (me + 1 + p - step) % p, receive = (me + p - step) % p;
    if (!exchange(ring, bytes(out_chunk(send)), count_of(send) * 4,
                  reinterpret_cast<uint8_t*>(out_chunk(receive)), count_of(receive) * 4))
      return false;
  }
  return true;
}

// One rank's whole run: kWarmUps untimed all-reduces, then the timed ones; the last
// result is checked.
bool run_rank(const Ring& ring, int rank, int ranks, size_t bytes, int iterations,
              AllreduceResult& result) {
  const size_t n = bytes / 4;
  std::vector<float> inputs(n), outputs(n), scratch(n / static_cast<size_t>(ranks) + 1);
  for (size_t i = 0; i < n; ++i) inputs[i] = input(rank, i);
  double total_us = 0;
  result.best_us = 1e18;
  for (int it = -kWarmUps; it < iterations; ++it) {
    const auto start = Clock::now();
    if (!ring_allreduce(ring, rank, ranks, inputs, outputs, scratch)) return false;
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (it >= 0) {
      total_us += us;
      result.best_us = std::min(result.best_us, us);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (outputs[i] != expected(ranks, i)) return false;
  }
  result.mean_us = iterations > 0 ? total_us / iterations : 0;
  return true;
}

// Rank `rank` connects to the next rank's listener and accepts the previous rank.
bool join_ring(const std::vector<int>& listeners, int rank, Ring& ring) {
  const int ranks = static_cast<int>(listeners.size());
  sockaddr_in next{};
  socklen_t len = sizeof(next);
  ::getsockname(listeners[static_cast<size_t>((rank + 1) % ranks)],
                reinterpret_cast<sockaddr*>(&next), &len);
  ring.to_next = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ring.to_next < 0 || ::connect(ring.to_next, reinterpret_cast<sockaddr*>(&next), len) != 0)
    return false;
  ring.from_previous =
      ::accept4(listeners[static_cast<size_t>(rank)], nullptr, nullptr, SOCK_CLOEXEC);
  if (ring.from_previous < 0) return false;
  const int on = 1;
  ::setsockopt(ring.to_next, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  ::setsockopt(ring.from_previous, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return true;
}

}  // namespace

std::optional<AllreduceResult> plain_tcp_allreduce(int ranks, size_t bytes, int iterations,
                                                   std::string& error) {
  if (ranks < 2 || bytes % 4 != 0 || bytes / 4 < static_cast<size_t>(ranks)) {
    error = "an all-reduce wants 2 ranks or more and a multiple of 4 bytes, 4 per rank or more";
    return std::nullopt;
  }
  // Every listener exists before any rank starts, so connects find them (the backlog
  // holds a connect until its rank accepts).
  std::vector<int> listeners;
  for (int r = 0; r < ranks; ++r) {
    const int fd = listen_loopback_tcp(error);
    if (fd < 0) {
      for (int l : listeners) ::close(l);
      return std::nullopt;
    }
    listeners.push_back(fd);
  }
  std::vector<pid_t> children;
  for (int r = 1; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      Ring ring;
      AllreduceResult ignored;
      ::_exit(join_ring(listeners, r, ring) && run_rank(ring, r, ranks, bytes, iterations, ignored)
                  ? 0
                  : 1);
    }
    if (pid < 0) {
      error = fmt::format("fork(): {}", std::strerror(errno));
      break;
    }
    children.push_back(pid);
  }
  AllreduceResult result;
  Ring ring;
  bool ok = error.empty() && join_ring(listeners, 0, ring) &&
            run_rank(ring, 0, ranks, bytes, iterations, result);
  for (int l : listeners) ::close(l);
  if (ring.to_next >= 0) ::close(ring.to_next);
  if (ring.from_previous >= 0) ::close(ring.from_previous);
  if (!ok) {
    for (pid_t pid : children) ::kill(pid, SIGKILL);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) {
    if (error.empty())
      error = fmt::format(
          "the {}-rank TCP all-reduce of {} bytes failed (a wrong result, or no "
          "progress for 10 s)",
          ranks, bytes);
    return std::nullopt;
  }
  return result;
}

}  // namespace spray::tools
