// spray-run: starts N local ranks of a program with the collective layer's environment
// (SPRAY_RANK, SPRAY_SIZE, SPRAY_STORE, SPRAY_PROVIDER), forwards their output line by
// line with a "[rank] " prefix, and returns the first non-zero exit status; when one
// rank fails, the others are terminated (SIGTERM, then SIGKILL after a grace period).
// A run is bounded: --timeout seconds after the start every rank still alive is killed.
// --keep-going lets the other ranks run on after a failure (to see how they react to a
// dead peer); the first failure is still the exit status. The ranks get a JobID of their
// own (FI_SPRAY_JOB_ID) unless the caller set one. With --secure they also get a secure
// domain key of their own (FI_SPRAY_TSS_KEY_FILE: the spray provider encrypts and
// authenticates every packet), in a file only its owner can read, removed at the end.
//
//   spray-run -n 4 [--provider spray] [--timeout 300] [--keep-going] [--secure] PROGRAM ARGS...
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace {

struct Rank {
  pid_t pid = -1;
  int out = -1;  // read ends of the rank's stdout and stderr pipes
  int err = -1;
  std::string out_line, err_line;  // partial lines not yet printed
  bool exited = false;
  int status = 0;  // exit code (128 + signal when killed)
};

// A TCP port free on loopback right now, for rank 0's store.
int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (s >= 0) close(s);
    return -1;
  }
  close(s);
  return ntohs(a.sin_port);
}

// This launch's secure domain key (--secure): 32 bytes from the kernel's random source,
// as 64 hex digits in a new file of mode 0600, unlinked when the launch ends.
class LaunchKeyFile {
 public:
  LaunchKeyFile() = default;
  LaunchKeyFile(const LaunchKeyFile&) = delete;
  LaunchKeyFile& operator=(const LaunchKeyFile&) = delete;
  ~LaunchKeyFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }

  bool create(std::string& error) {
    unsigned char key[32];
    if (getrandom(key, sizeof(key), 0) != static_cast<ssize_t>(sizeof(key))) {
      error = fmt::format("getrandom: {}", std::strerror(errno));
      return false;
    }
    std::string name = "/tmp/spray-tss-key-XXXXXX";
    const int fd = mkstemp(name.data());  // mode 0600
    if (fd < 0) {
      error = fmt::format("cannot create a key file in /tmp: {}", std::strerror(errno));
      return false;
    }
    path_ = name;
    std::string hex;
    for (unsigned char b : key) hex += fmt::format("{:02x}", b);
    hex += '\n';
    const bool written = write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
    close(fd);
    if (!written) error = fmt::format("cannot write the key file {}", path_);
    return written;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Prints complete lines of `chunk` with the rank prefix; keeps the rest in `pending`.
void forward(int rank, std::string& pending, const char* chunk, size_t n, FILE* to) {
  pending.append(chunk, n);
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    fmt::print(to, "[{}] {}\n", rank, std::string_view(pending).substr(start, nl - start));
  }
  pending.erase(0, start);
  fflush(to);
}

void flush_rest(int rank, std::string& pending, FILE* to) {
  if (!pending.empty()) fmt::print(to, "[{}] {}\n", rank, pending);
  pending.clear();
}

pid_t launch(int rank, int size, const std::string& store, const std::string& provider,
             const std::vector<std::string>& command, Rank& r) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    setenv("SPRAY_RANK", std::to_string(rank).c_str(), 1);
    setenv("SPRAY_SIZE", std::to_string(size).c_str(), 1);
    setenv("SPRAY_STORE", store.c_str(), 1);
    if (!provider.empty()) setenv("SPRAY_PROVIDER", provider.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fmt::print(stderr, "cannot run {}: {}\n", command[0], std::strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  r.out = out[0];
  r.err = err[0];
  r.pid = pid;
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Start N local ranks of a collective program"};
  int n = 1;
  std::string provider;
  double timeout_s = 600;
  double grace_s = 2;
  bool keep_going = false;
  bool secure = false;
  std::vector<std::string> command;
  app.add_option("-n,--ranks", n, "Number of ranks")->required()->check(CLI::Range(1, 1024));
  app.add_option("--provider", provider, "libfabric provider for the ranks (SPRAY_PROVIDER)");
  app.add_option("--timeout", timeout_s, "Kill every rank after this many seconds");
  app.add_option("--grace", grace_s, "Seconds between SIGTERM and SIGKILL when stopping ranks");
  app.add_flag("--keep-going", keep_going, "Do not stop the other ranks when one fails");
  app.add_flag("--secure", secure,
               "Give the ranks a secure domain key of this launch's own (FI_SPRAY_TSS_KEY_FILE, "
               "unless already set): the spray provider then encrypts and authenticates every "
               "packet (UET TSS)");
  app.prefix_command();  // PROGRAM and everything after it belong to the ranks
  app.footer("PROGRAM ARGS...: the command every rank runs");
  CLI11_PARSE(app, argc, argv);
  command = app.remaining();
  if (command.empty()) {
    fmt::print(stderr, "spray-run: no PROGRAM given\n{}", app.help());
    return 2;
  }

  const int port = free_port();
  if (port < 0) {
    fmt::print(stderr, "spray-run: no free TCP port on loopback for the store\n");
    return 1;
  }
  const std::string store = fmt::format("127.0.0.1:{}", port);
  // The ranks of this launch are one job, and no other launch's: a JobID of their own
  // (the spray provider's FI_SPRAY_JOB_ID), unless the caller chose one, so that endpoints
  // of another run that happen to take over the address of a dead rank are not sent its
  // messages. Inherited by every rank from here.
  if (std::getenv("FI_SPRAY_JOB_ID") == nullptr) {
    std::random_device random;
    setenv("FI_SPRAY_JOB_ID", std::to_string(1 + random() % 0xffffff).c_str(), 1);
  }
  LaunchKeyFile key_file;
  if (secure && std::getenv("FI_SPRAY_TSS_KEY_FILE") == nullptr) {
    std::string error;
    if (!key_file.create(error)) {
      fmt::print(stderr, "spray-run: --secure: {}\n", error);
      return 1;
    }
    setenv("FI_SPRAY_TSS_KEY_FILE", key_file.path().c_str(), 1);
  }
  signal(SIGPIPE, SIG_IGN);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (launch(r, n, store, provider, command, ranks[static_cast<size_t>(r)]) < 0) {
      fmt::print(stderr, "spray-run: cannot start rank {}: {}\n", r, std::strerror(errno));
      return 1;
    }
  }

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int first_failure = 0;
  int failed_rank = -1;
  Clock::time_point term_sent{};
  bool terminating = false;
  auto stop_all = [&](const char* why) {
    if (terminating) return;
    terminating = true;
    term_sent = Clock::now();
    fmt::print(stderr, "spray-run: {}; stopping the other ranks\n", why);
    for (Rank& r : ranks) {
      if (!r.exited) kill(r.pid, SIGTERM);
    }
  };

  size_t running = ranks.size();
  while (running > 0) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owner;  // (rank, is_stderr)
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].out >= 0) {
        fds.push_back({ranks[i].out, POLLIN, 0});
        owner.emplace_back(i, false);
      }
      if (ranks[i].err >= 0) {
        fds.push_back({ranks[i].err, POLLIN, 0});
        owner.emplace_back(i, true);
      }
    }
    poll(fds.data(), fds.size(), 50);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Rank& r = ranks[owner[k].first];
      const bool is_err = owner[k].second;
      char buf[4096];
      const ssize_t got = read(fds[k].fd, buf, sizeof(buf));
      std::string& pending = is_err ? r.err_line : r.out_line;
      FILE* to = is_err ? stderr : stdout;
      if (got > 0) {
        forward(static_cast<int>(owner[k].first), pending, buf, static_cast<size_t>(got), to);
      } else {
        flush_rest(static_cast<int>(owner[k].first), pending, to);
        close(fds[k].fd);
        (is_err ? r.err : r.out) = -1;
      }
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (r.exited) continue;
      int status = 0;
      if (waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.exited = true;
      --running;
      r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (r.status != 0 && first_failure == 0 && !terminating) {
        first_failure = r.status;
        failed_rank = static_cast<int>(i);
        if (!keep_going)
          stop_all(fmt::format("rank {} exited with status {}", i, r.status).c_str());
      }
    }
    const auto now = Clock::now();
    if (!terminating && now >= deadline && running > 0) {
      first_failure = 124;
      stop_all(fmt::format("timed out after {} s", timeout_s).c_str());
    }
    if (terminating && now - term_sent > std::chrono::duration<double>(grace_s)) {
      for (Rank& r : ranks) {
        if (!r.exited) kill(r.pid, SIGKILL);
      }
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {  // output that arrived after the exit
    for (int* fd : {&ranks[i].out, &ranks[i].err}) {
      if (*fd < 0) continue;
      char buf[4096];
      std::string& pending = fd == &ranks[i].out ? ranks[i].out_line : ranks[i].err_line;
      FILE* to = fd == &ranks[i].out ? stdout : stderr;
      for (ssize_t got; (got = read(*fd, buf, sizeof(buf))) > 0;) {
        forward(static_cast<int>(i), pending, buf, static_cast<size_t>(got), to);
      }
      flush_rest(static_cast<int>(i), pending, to);
      close(*fd);
    }
  }
  if (failed_rank >= 0) fmt::print(stderr, "spray-run: rank {} failed first\n", failed_rank);
  return first_failure;
}
