// SendDrainer: a thread that finishes a FabricLink's injected sends while its caller is
// away. An injected send is complete for the caller at once, but over a provider with
// manual progress (spray) nothing resends its packets if they are lost, or reads the
// acknowledgement that frees its slot, unless someone polls the link; a rank may compute
// for seconds between two collectives while a peer waits for that message.
//
// Every period the drainer asks the link to poll once (FabricLink::progress_due_sends):
// only if sends are due and no caller came into the link during the period (a caller in
// a loop of collectives progresses the link itself), and only by try-locking it. The
// period is 1 ms while the drainer polls and sends stay due, well under spray's 2 ms
// initial RTO; otherwise it doubles up to 16 ms. So a caller that leaves sends behind
// has them polled within 16 ms, then every ms until they complete, and a busy or idle
// link costs ~60 wake-ups a second. A period of 1 ms whenever sends were due (every
// collective leaves some) took back half of what injecting saved at 4 ranks on 2 cores:
// each wake-up preempts a rank that the others wait for.
// It is a thread of its own rather than FI_PROGRESS_AUTO because it polls only while a
// caller is away with sends due, and never takes the domain's lock from a caller in the
// middle of a collective.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

namespace spray::coll {

class FabricLink;

class SendDrainer {
 public:
  explicit SendDrainer(FabricLink& link);
  ~SendDrainer();  // stops the thread and joins it
  SendDrainer(const SendDrainer&) = delete;
  SendDrainer& operator=(const SendDrainer&) = delete;

 private:
  void run();

  FabricLink& link_;  // outlives the drainer (FabricLink owns it and stops it first)
  std::mutex mutex_;  // guards stopping_
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace spray::coll
