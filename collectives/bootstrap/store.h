// The rendezvous store: a small TCP key-value store that ranks use once, at start-up,
// to find each other (each publishes its libfabric endpoint name under its rank).
//
// Rank 0 hosts a StoreServer on the address in SPRAY_STORE; every rank (rank 0 too)
// talks to it through a StoreClient. Keys are written once; `get` waits until the key
// exists or the timeout passes, so a rank that never shows up becomes a clear error in
// the others ("timed out after 30 s waiting for key 'addr/3'") rather than a hang.
//
// Protocol (one TCP connection per client, one request at a time: the next is sent
// once the last is answered):
//   request  := op:u8 ('S' set | 'G' get)  key_len:u32  key  [value_len:u32 value]  (set only)
//   response := status:u8  value_len:u32  value
// Status 0 is ok; the value is the key's for a get and empty for a set. Status 1 refuses
// the request; the value is the reason in text, and the server then closes the
// connection. Refused: an unknown op, a key over 4 KiB, a value over 1 MiB, a request
// sent before the last was answered, and a set of a key that already holds a different
// value (keys are written once; setting the same value again is allowed). Integers are
// little-endian.
//
// A get of a key not set yet is parked until the key is set; a client that goes away
// meanwhile is forgotten at once, so clients that time out leave nothing behind.
//
// Built on Boost.Asio: the server runs its own event loop on a background thread; the
// client uses blocking calls bounded by deadlines (io_context::run_for).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spray::coll {

using Bytes = std::vector<uint8_t>;

class StoreServer {
 public:
  // Listens on host:port ("0.0.0.0:29500", "127.0.0.1:0" for any free port). On failure
  // returns nullptr and an error naming the cause (port in use, bad address).
  static std::unique_ptr<StoreServer> start(const std::string& address, std::string& error);
  ~StoreServer();  // stops the loop and closes every connection
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const;
  // Gets parked now, waiting for their key (for tests and diagnostics).
  size_t parked_gets() const;

 private:
  struct State;
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class StoreClient {
 public:
  // Connects to host:port, retrying until `timeout` (the server may start a little
  // after the clients). nullptr and an error when it never answers.
  static std::unique_ptr<StoreClient> connect(const std::string& address,
                                              std::chrono::milliseconds timeout,
                                              std::string& error);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // False and an error if the connection broke or the store refused the request (with
  // the store's reason).
  bool set(const std::string& key, const Bytes& value, std::string& error);
  // Waits until `key` exists; false and an error on timeout or a broken connection.
  bool get(const std::string& key, std::chrono::milliseconds timeout, Bytes& value,
           std::string& error);

 private:
  struct State;
  explicit StoreClient(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// "host:port" split; false for a malformed address.
bool split_host_port(const std::string& address, std::string& host, uint16_t& port);

}  // namespace spray::coll
