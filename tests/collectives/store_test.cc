// The rendezvous store: set/get, a get that waits for a later set, timeouts with clear
// errors, bad addresses, many clients at once; and malformed or hostile requests sent
// over raw sockets, which are refused with a reason and leave the store serving others.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "collectives/bootstrap/store.h"
#include "collectives/bootstrap/store_protocol.h"

namespace spray::coll {
namespace {

using std::chrono::milliseconds;

struct Store : ::testing::Test {
  std::unique_ptr<StoreServer> server;
  std::string address;
  void SetUp() override {
    std::string error;
    server = StoreServer::start("127.0.0.1:0", error);
    ASSERT_NE(server, nullptr) << error;
    address = "127.0.0.1:" + std::to_string(server->port());
  }
  std::unique_ptr<StoreClient> client() {
    std::string error;
    auto c = StoreClient::connect(address, milliseconds(5000), error);
    EXPECT_NE(c, nullptr) << error;
    return c;
  }
};

TEST_F(Store, set__then_get_returns_the_value) {
  auto c = client();
  std::string error;
  ASSERT_TRUE(c->set("addr/0", {1, 2, 3}, error)) << error;
  Bytes v;
  ASSERT_TRUE(c->get("addr/0", milliseconds(1000), v, error)) << error;
  EXPECT_EQ(v, (Bytes{1, 2, 3}));
  ASSERT_TRUE(c->set("empty", {}, error));
  ASSERT_TRUE(c->get("empty", milliseconds(1000), v, error));
  EXPECT_TRUE(v.empty());
}

TEST_F(Store, get__waits_for_a_set_from_another_client) {
  auto reader = client();
  auto writer = client();
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(100));
    std::string error;
    EXPECT_TRUE(writer->set("late", Bytes(100000, 7), error)) << error;
  });
  Bytes v;
  std::string error;
  EXPECT_TRUE(reader->get("late", milliseconds(10000), v, error)) << error;
  late.join();
  EXPECT_EQ(v, Bytes(100000, 7));
  // The woken connection goes on serving requests.
  EXPECT_TRUE(reader->set("after", {9}, error)) << error;
  EXPECT_TRUE(reader->get("after", milliseconds(1000), v, error)) << error;
  EXPECT_EQ(v, Bytes{9});
  EXPECT_EQ(server->parked_gets(), 0u);
}

TEST_F(Store, get__of_a_key_never_set_times_out_with_its_name) {
  auto c = client();
  Bytes v;
  std::string error;
  EXPECT_FALSE(c->get("addr/3", milliseconds(100), v, error));
  EXPECT_NE(error.find("addr/3"), std::string::npos) << error;
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  // The timed-out connection is closed, and says so, rather than answering out of turn.
  EXPECT_FALSE(c->set("x", {1}, error));
}

TEST_F(Store, many_clients__each_read_every_value) {
  constexpr int kClients = 16;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int r = 0; r < kClients; ++r) {
    threads.emplace_back([&, r] {
      std::string error;
      auto c = StoreClient::connect(address, milliseconds(5000), error);
      if (!c || !c->set("k/" + std::to_string(r), {static_cast<uint8_t>(r)}, error)) return;
      for (int k = 0; k < kClients; ++k) {
        Bytes v;
        if (!c->get("k/" + std::to_string(k), milliseconds(10000), v, error)) return;
        if (v != Bytes{static_cast<uint8_t>(k)}) return;
      }
      ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
}

TEST_F(Store, set__of_a_key_holding_another_value_is_refused_with_the_reason) {
  auto first = client();
  auto second = client();
  std::string error;
  ASSERT_TRUE(first->set("addr/1", {1}, error)) << error;
  EXPECT_TRUE(second->set("addr/1", {1}, error)) << error;  // the same value again: allowed
  EXPECT_FALSE(second->set("addr/1", {2}, error));
  EXPECT_NE(error.find("already holds a different value"), std::string::npos) << error;
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
  Bytes v;
  ASSERT_TRUE(first->get("addr/1", milliseconds(1000), v, error)) << error;
  EXPECT_EQ(v, Bytes{1});  // the first value stands
}

// A raw connection to the store, for requests StoreClient would never send.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0;
  }
  ~RawConnection() { close(); }
  bool connected() const { return connected_; }
  void send(const Bytes& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Half-closes: the server reads end of stream after what was sent.
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Everything the server sends until it closes the connection or 5 s pass.
  Bytes read_until_closed() {
    Bytes got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      uint8_t buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_by_server_ = true;
        break;
      }
      got.insert(got.end(), buf, buf + n);
    }
    return got;
  }
  bool closed_by_server() const { return closed_by_server_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_by_server_ = false;
};

// The refusal's reason, or "(status N)" for anything but one refusal response.
std::string refusal_reason(const Bytes& response) {
  if (response.size() < 5) return "(short response)";
  if (response[0] != store_protocol::kRefused)
    return "(status " + std::to_string(response[0]) + ")";
  const uint32_t n = store_protocol::load_u32(&response[1]);
  if (response.size() != 5 + n) return "(length mismatch)";
  return std::string(response.begin() + 5, response.end());
}

Bytes header(uint8_t op, uint32_t key_len) {
  Bytes out{op};
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(key_len >> (8 * i)));
  return out;
}

// Waits (up to 5 s) until the server holds `n` parked gets; the last count seen.
size_t wait_for_parked(const StoreServer& server, size_t n) {
  size_t seen = server.parked_gets();
  for (int i = 0; i < 500 && seen != n; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    seen = server.parked_gets();
  }
  return seen;
}

TEST_F(Store, malformed_requests__are_refused_with_the_reason_and_closed) {
  struct Case {
    Bytes request;
    std::string reason;
  };
  Bytes too_large_value = store_protocol::request('S', "k", nullptr);
  for (int i = 0; i < 4; ++i) {
    too_large_value.push_back(static_cast<uint8_t>((store_protocol::kMaxValue + 1) >> (8 * i)));
  }
  const std::vector<Case> cases = {
      {header('X', 1), "unknown request 0x58"},
      {header('S', store_protocol::kMaxKey + 1), "key of 4097 bytes is over the limit"},
      {header('G', 0xffffffffu), "key of 4294967295 bytes"},
      {too_large_value, "value of 1048577 bytes for key 'k' is over the limit"},
  };
  for (const auto& c : cases) {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.connected());
    raw.send(c.request);
    const std::string reason = refusal_reason(raw.read_until_closed());
    EXPECT_NE(reason.find(c.reason), std::string::npos) << reason;
    EXPECT_TRUE(raw.closed_by_server()) << c.reason;
  }
  // The store still serves well-formed clients.
  auto good = client();
  std::string error;
  ASSERT_TRUE(good->set("still", {1}, error)) << error;
}

TEST_F(Store, parked_get__of_a_client_that_goes_away_is_forgotten) {
  {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.connected());
    raw.send(store_protocol::request('G', "never", nullptr));
    EXPECT_EQ(wait_for_parked(*server, 1), 1u);
  }  // closed
  EXPECT_EQ(wait_for_parked(*server, 0), 0u);
  // A StoreClient whose get times out closes its connection: nothing stays parked.
  auto c = client();
  Bytes v;
  std::string error;
  EXPECT_FALSE(c->get("never", milliseconds(50), v, error));
  EXPECT_EQ(wait_for_parked(*server, 0), 0u);
  // A later set of the key finds nobody to answer and is still stored.
  auto writer = client();
  ASSERT_TRUE(writer->set("never", {3}, error)) << error;
  ASSERT_TRUE(writer->get("never", milliseconds(1000), v, error)) << error;
  EXPECT_EQ(v, Bytes{3});
}

TEST_F(Store, request_sent_while_a_get_is_parked__is_refused) {
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.connected());
  raw.send(store_protocol::request('G', "later", nullptr));
  ASSERT_EQ(wait_for_parked(*server, 1), 1u);
  raw.send(store_protocol::request('G', "other", nullptr));
  const std::string reason = refusal_reason(raw.read_until_closed());
  EXPECT_NE(reason.find("before the pending get was answered"), std::string::npos) << reason;
  EXPECT_EQ(wait_for_parked(*server, 0), 0u);
}

// Seeded random bytes from many connections, some shaped like real requests so that
// they reach the key and value parsing and the parking of gets. Every connection is
// closed; the store must end with nothing parked and still serve a good client.
TEST_F(Store, random_bytes_from_many_connections__leave_the_store_serving) {
  std::mt19937 random(20261123);
  for (int i = 0; i < 300; ++i) {
    RawConnection raw(server->port());
    ASSERT_TRUE(raw.connected());
    Bytes bytes;
    switch (random() % 3) {
      case 0:  // noise
        bytes.resize(1 + random() % 64);
        for (auto& b : bytes) b = static_cast<uint8_t>(random());
        break;
      case 1:  // a get, often of a key nobody sets, sometimes cut short
        bytes = store_protocol::request('G', "k" + std::to_string(random() % 8), nullptr);
        bytes.resize(1 + random() % bytes.size());
        break;
      default: {  // a set with a random declared value length, cut anywhere
        const Bytes value(random() % 32, static_cast<uint8_t>(i));
        bytes = store_protocol::request('S', "s" + std::to_string(i), &value);
        bytes[bytes.size() - value.size() - 4 + random() % 4] = static_cast<uint8_t>(random());
        bytes.resize(1 + random() % bytes.size());
      }
    }
    raw.send(bytes);
    if (random() % 4 == 0) {  // sometimes read the verdict, or the close at end of stream
      raw.finish_sending();
      raw.read_until_closed();
      EXPECT_TRUE(raw.closed_by_server());
    }
  }
  EXPECT_EQ(wait_for_parked(*server, 0), 0u);
  auto good = client();
  std::string error;
  Bytes v;
  ASSERT_TRUE(good->set("k0", {42}, error)) << error;
  ASSERT_TRUE(good->get("k0", milliseconds(1000), v, error)) << error;
  EXPECT_EQ(v, Bytes{42});
}

TEST(StoreErrors, bad_addresses_and_unreachable_stores_are_named) {
  std::string error;
  EXPECT_EQ(StoreServer::start("nonsense", error), nullptr);
  EXPECT_NE(error.find("host:port"), std::string::npos) << error;
  EXPECT_EQ(StoreServer::start("999.1.1.1:80", error), nullptr);
  EXPECT_EQ(StoreClient::connect("127.0.0.1:1", milliseconds(100), error), nullptr);
  EXPECT_NE(error.find("cannot reach the store"), std::string::npos) << error;
}

TEST(StoreErrors, port_in_use_is_reported) {
  std::string error;
  auto first = StoreServer::start("127.0.0.1:0", error);
  ASSERT_NE(first, nullptr);
  auto second = StoreServer::start("127.0.0.1:" + std::to_string(first->port()), error);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(error.find("cannot listen"), std::string::npos) << error;
}

}  // namespace
}  // namespace spray::coll
