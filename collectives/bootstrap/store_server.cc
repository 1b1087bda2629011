// StoreServer: the Boost.Asio event loop behind the rendezvous store (see store.h).
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>

#include <cstring>
#include <future>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "collectives/bootstrap/store.h"
#include "collectives/bootstrap/store_protocol.h"

namespace spray::coll {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

class Session;

// The keys, and the sessions parked on a `get` of a key not written yet. Touched only
// from the event loop's thread.
struct Table {
  std::map<std::string, Bytes> values;
  std::multimap<std::string, std::shared_ptr<Session>> waiting;
};

// One client connection: reads a request, answers it (or parks it until its key is
// set), then reads the next. Lives as long as an asynchronous operation (or the table
// of parked gets) holds it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Table& table) : socket_(std::move(socket)), table_(table) {}

  void read_request() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(head_), [self](boost::system::error_code ec, size_t) {
      if (ec) return;
      self->op_ = self->head_[0];
      const uint32_t key_len = store_protocol::load_u32(&self->head_[1]);
      if (self->op_ != 'S' && self->op_ != 'G') {
        return self->refuse(
            fmt::format("unknown request 0x{:02x} (not 'S' set or 'G' get)", self->op_));
      }
      if (key_len > store_protocol::kMaxKey) {
        return self->refuse(fmt::format("key of {} bytes is over the limit of {}", key_len,
                                        store_protocol::kMaxKey));
      }
      self->key_.assign(key_len, '\0');
      asio::async_read(self->socket_, asio::buffer(self->key_),
                       [self](boost::system::error_code ec2, size_t) {
                         if (ec2) return;
                         if (self->op_ == 'G') return self->answer_get();
                         self->read_value();
                       });
    });
  }

  // Answers a parked get with the value just set, then reads the next request.
  void wake(const Bytes& value) {
    parked_ = false;
    boost::system::error_code ignored;
    socket_.cancel(ignored);  // ends the watch begun by park()
    reply(value);
  }

 private:
  // Sends `value` as an ok response, then reads the next request.
  void reply(const Bytes& value) {
    out_ = store_protocol::response(store_protocol::kOk, value);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self](boost::system::error_code ec, size_t) {
      if (!ec) self->read_request();
    });
  }

  // Sends the reason as a refusal, then closes the connection: after a malformed request
  // the stream cannot be trusted to be where the next request starts.
  void refuse(const std::string& reason) {
    out_ = store_protocol::response(store_protocol::kRefused, Bytes(reason.begin(), reason.end()));
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self](boost::system::error_code, size_t) {
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->socket_.close(ignored);
    });
  }

  void read_value() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(len_), [self](boost::system::error_code ec, size_t) {
      if (ec) return;
      const uint32_t n = store_protocol::load_u32(self->len_.data());
      if (n > store_protocol::kMaxValue) {
        return self->refuse(fmt::format("value of {} bytes for key '{}' is over the limit of {}", n,
                                        self->key_, store_protocol::kMaxValue));
      }
      self->value_.assign(n, 0);
      asio::async_read(self->socket_, asio::buffer(self->value_),
                       [self](boost::system::error_code ec2, size_t) {
                         if (!ec2) self->store();
                       });
    });
  }

  void store() {
    const auto [at, inserted] = table_.values.try_emplace(key_, value_);
    if (!inserted && at->second != value_) {
      return refuse(
          fmt::format("key '{}' already holds a different value (keys are written once)", key_));
    }
    auto [first, last] = table_.waiting.equal_range(key_);
    std::vector<std::shared_ptr<Session>> woken;
    for (auto it = first; it != last; ++it) woken.push_back(it->second);
    table_.waiting.erase(first, last);
    for (auto& s : woken) s->wake(value_);
    reply({});
  }

  void answer_get() {
    auto it = table_.values.find(key_);
    if (it != table_.values.end()) return reply(it->second);
    park();
  }

  // Parks this get until key_ is set, and watches the socket meanwhile: a client that
  // goes away (a rank that timed out or died) is dropped from the table at once instead
  // of staying there until the key is set or the server stops.
  void park() {
    parked_ = true;
    table_.waiting.emplace(key_, shared_from_this());
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(watch_), [self](boost::system::error_code ec, size_t) {
      if (ec == asio::error::operation_aborted) return;  // woken: the answer is on its way
      if (self->parked_) {
        self->unpark();
        // Bytes while parked: the client sent a request before this one was answered.
        if (!ec) return self->refuse("request sent before the pending get was answered");
      }
      boost::system::error_code ignored;
      self->socket_.close(ignored);  // the client is gone, or misbehaved while being woken
    });
  }

  void unpark() {
    parked_ = false;
    auto [first, last] = table_.waiting.equal_range(key_);
    for (auto it = first; it != last; ++it) {
      if (it->second.get() == this) {
        table_.waiting.erase(it);
        return;
      }
    }
  }

  tcp::socket socket_;
  Table& table_;
  std::array<uint8_t, 5> head_{};
  std::array<uint8_t, 4> len_{};
  std::array<uint8_t, 1> watch_{};  // read by park()'s watch; a byte here is a protocol error
  uint8_t op_ = 0;
  bool parked_ = false;  // in table_.waiting
  std::string key_;
  Bytes value_;
  Bytes out_;
};

}  // namespace

struct StoreServer::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Table table;
  std::thread loop;

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed: the server is stopping
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(std::move(socket), table)->read_request();
      accept();
    });
  }
};

std::unique_ptr<StoreServer> StoreServer::start(const std::string& address, std::string& error) {
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, host, port)) {
    error = "store address '" + address + "' is not host:port";
    return nullptr;
  }
  auto state = std::make_unique<State>();
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    error = "store address '" + host + "' is not an IP address";
    return nullptr;
  }
  const tcp::endpoint at(ip, port);
  state->acceptor.open(at.protocol(), ec);
  if (!ec) state->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(at, ec);
  if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = "cannot listen on " + address + ": " + ec.message();
    return nullptr;
  }
  state->accept();
  State* s = state.get();
  state->loop = std::thread([s] { s->io.run(); });
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(state)));
}

StoreServer::StoreServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

StoreServer::~StoreServer() {
  asio::post(state_->io, [s = state_.get()] {
    boost::system::error_code ignored;
    s->acceptor.close(ignored);
    s->table.waiting.clear();
    s->io.stop();
  });
  state_->loop.join();
}

uint16_t StoreServer::port() const {
  return state_->acceptor.local_endpoint().port();
}

size_t StoreServer::parked_gets() const {
  // The table belongs to the loop's thread: ask it there.
  std::promise<size_t> count;
  asio::post(state_->io, [&] { count.set_value(state_->table.waiting.size()); });
  return count.get_future().get();
}

bool split_host_port(const std::string& address, std::string& host, uint16_t& port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]:port
  }
  unsigned long p = 0;
  try {
    size_t used = 0;
    p = std::stoul(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) return false;
  } catch (...) {
    return false;
  }
  if (p > 65535) return false;
  port = static_cast<uint16_t>(p);
  return true;
}

}  // namespace spray::coll
