// The rendezvous store: set/get, a get that waits for a later set, timeouts with clear
// errors, bad addresses, and many clients at once.
#include <gtest/gtest.h>

#include <thread>

#include "collectives/bootstrap/store.h"

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
