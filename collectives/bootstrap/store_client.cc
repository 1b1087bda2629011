// StoreClient: blocking requests to the rendezvous store, each bounded by a deadline.
// Every call starts asynchronous Asio operations and runs the client's private
// io_context until they finish or the deadline passes (then the socket is closed: a
// timed-out connection is not reused).
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>

#include <thread>

#include "collectives/bootstrap/store.h"
#include "collectives/bootstrap/store_protocol.h"

namespace spray::coll {

namespace asio = boost::asio;
using asio::ip::tcp;
using std::chrono::milliseconds;

namespace {
// A set is answered at once unless the store is gone.
constexpr milliseconds kSetTimeout{10000};
}  // namespace

struct StoreClient::State {
  asio::io_context io;
  tcp::socket socket{io};

  // Runs the io_context until `done` or `timeout`; on timeout closes the socket.
  bool run(bool& done, milliseconds timeout) {
    io.restart();
    io.run_for(timeout);
    if (done) return true;
    boost::system::error_code ignored;
    socket.close(ignored);
    io.restart();
    io.run();  // let the cancelled operations finish
    return false;
  }

  // Sends `request` and reads one response; false with `error` set on failure (the
  // store's reason when it refused the request).
  bool exchange(const Bytes& request, milliseconds timeout, Bytes& value, std::string& error) {
    if (!socket.is_open()) {
      error = "the connection to the store was closed after an earlier timeout or refusal";
      return false;
    }
    bool done = false;
    boost::system::error_code failure;
    std::array<uint8_t, 5> head{};
    asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec, size_t) {
      if (ec) {
        failure = ec;
        done = true;
        return;
      }
      asio::async_read(socket, asio::buffer(head), [&](boost::system::error_code ec2, size_t) {
        const uint32_t n = store_protocol::load_u32(&head[1]);
        if (!ec2 && n > store_protocol::kMaxValue) ec2 = asio::error::message_size;
        if (ec2) {
          failure = ec2;
          done = true;
          return;
        }
        value.assign(n, 0);
        asio::async_read(socket, asio::buffer(value), [&](boost::system::error_code ec3, size_t) {
          failure = ec3;
          done = true;
        });
      });
    });
    if (!run(done, timeout)) {
      error = "timed out";
      return false;
    }
    if (failure) {
      error = failure == asio::error::eof ? "the store closed the connection" : failure.message();
      return false;
    }
    if (head[0] != store_protocol::kOk) {
      error = head[0] == store_protocol::kRefused
                  ? "the store refused it: " + std::string(value.begin(), value.end())
                  : "the store answered with unknown status " + std::to_string(head[0]);
      value.clear();
      boost::system::error_code ignored;
      socket.close(ignored);  // the store closes a refused connection too
      return false;
    }
    return true;
  }
};

std::unique_ptr<StoreClient> StoreClient::connect(const std::string& address, milliseconds timeout,
                                                  std::string& error) {
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port)) {
    error = "store address '" + address + "' is not host:port";
    return nullptr;
  }
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    error = "store address '" + host + "' is not an IP address";
    return nullptr;
  }
  auto state = std::make_unique<State>();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no attempt";
  while (std::chrono::steady_clock::now() < deadline) {
    bool done = false;
    boost::system::error_code result;
    state->socket.async_connect(tcp::endpoint(ip, port), [&](boost::system::error_code e) {
      result = e;
      done = true;
    });
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (state->run(done, std::max(left, milliseconds(1))) && !result) {
      state->socket.set_option(tcp::no_delay(true));
      return std::unique_ptr<StoreClient>(new StoreClient(std::move(state)));
    }
    last = done ? result.message() : "timed out";
    boost::system::error_code ignored;
    state->socket.close(ignored);
    std::this_thread::sleep_for(milliseconds(20));  // the server may not listen yet
  }
  error = "cannot reach the store at " + address + " within " + std::to_string(timeout.count()) +
          " ms (" + last + ")";
  return nullptr;
}

StoreClient::StoreClient(std::unique_ptr<State> state) : state_(std::move(state)) {}
StoreClient::~StoreClient() = default;

bool StoreClient::set(const std::string& key, const Bytes& value, std::string& error) {
  if (key.size() > store_protocol::kMaxKey || value.size() > store_protocol::kMaxValue) {
    error = "key or value too large for the store";
    return false;
  }
  Bytes ignored;
  if (state_->exchange(store_protocol::request('S', key, &value), kSetTimeout, ignored, error)) {
    return true;
  }
  error = "store set '" + key + "': " + error;
  return false;
}

bool StoreClient::get(const std::string& key, milliseconds timeout, Bytes& value,
                      std::string& error) {
  if (key.size() > store_protocol::kMaxKey) {
    error = "key too large for the store";
    return false;
  }
  if (state_->exchange(store_protocol::request('G', key, nullptr), timeout, value, error)) {
    return true;
  }
  error = "store get '" + key + "': " + error;
  if (error.ends_with("timed out")) error += " after " + std::to_string(timeout.count()) + " ms";
  return false;
}

}  // namespace spray::coll
