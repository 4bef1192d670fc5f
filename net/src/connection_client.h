// A client's connection to one node daemon: its own io thread, a connect and handshake
// with a deadline, and calls matched to replies by id (RegisterGraph -> Registered by
// request id, RunStep -> StepDone by step id). Many threads may wait at once; each wait
// ends at its deadline or when the connection dies, whichever is first, with an error
// that names the daemon.
//
// Who runs the connection's io_context: the io thread, or, on the fast path, the calling
// thread itself. A run_step on an idle client (no other call or watcher outstanding)
// takes the loop over: it writes its RunStep and reads the StepDone on its own thread, as
// a blocking echo client does, with no hand-off to the io thread and back (every frame
// that arrives meanwhile goes to the same handlers, on this thread; timers, heartbeats
// included, fire there too; the wait ends at the step's deadline). The io thread stays
// off the loop while callers come back within kLinger of each other, and takes it back
// after that, or at once when a call is left that no caller drives (a concurrent
// caller's step, a registration, a watcher).
#pragma once
#include <asio.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "connection.h"

namespace actorflow::net {

// The heartbeat settings of this process's client connections (sessions on af://
// targets, daemon-to-daemon links a caller does not configure otherwise): what
// set_client_heartbeat() last set (daemon.h), else ConnectionOptions' defaults.
ConnectionOptions client_connection_options();

class DaemonClient {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNoDeadline = Clock::time_point::max();
  // RunStepMsg::timeout_ms for a step due by `deadline` (not kNoDeadline): the
  // milliseconds left, at least 1, so that a step already late still has one.
  static int64_t timeout_ms_until(Clock::time_point deadline);

  // Connects to host:port and authenticates with `token` ("" for an --insecure daemon)
  // by `deadline`. `label` names the daemon in errors ("af://127.0.0.1:2222"). A daemon
  // dialing a peer daemon passes its own listening address as `peer_self_address`.
  static Result<std::unique_ptr<DaemonClient>> connect(const std::string& host, uint16_t port, const std::string& token,
                                                       const std::string& label, Clock::time_point deadline,
                                                       ConnectionOptions options = client_connection_options(),
                                                       std::string peer_self_address = {});
  ~DaemonClient();
  // Closes the connection and waits for the io thread to end (the destructor does the
  // same). Whoever drops the client while another thread may hold it calls this first:
  // a thread that held the last reference would otherwise destroy the client on its way
  // out, and that may be the io thread itself, which cannot join itself.
  void stop();

  // A RegisterGraph (a partition) as given; its request id is set here.
  Result<uint64_t> register_message(RegisterGraphMsg m, Clock::time_point deadline);
  // Queues a message that expects no answer (an Edge or Credit between daemons); fails,
  // sending nothing, when it is over the largest frame the daemon accepts.
  Status post(Message m);
  // Called on the io thread with every message that answers no call (Edge and Credit
  // frames from a peer daemon). Set it before sending anything.
  void set_message_handler(std::function<void(Message&&)> h) { other_ = std::move(h); }
  // Called once, on the io thread, when the connection closes (at once, on this thread,
  // if it has closed already). For the log line of a lost peer.
  void set_close_handler(std::function<void(const Status&)> h);
  // Sends one step and waits for its answer: on the calling thread (the fast path, see
  // above) when no other call is outstanding, else as start_step + wait_step.
  Result<StepDoneMsg> run_step(RunStepMsg m, Clock::time_point deadline);
  // run_step in two halves: send now (frames leave in the order of these calls), wait later.
  Status start_step(RunStepMsg m, Clock::time_point deadline);
  Result<StepDoneMsg> wait_step(uint64_t step_id, Clock::time_point deadline);
  // Calls `fn` once step `step_id`'s answer is here or the connection has closed (at once
  // if that is so already), from the io thread or this one: wait_step then returns
  // without waiting. Lets one thread wait for the steps of several daemons.
  void notify_when_done(uint64_t step_id, std::function<void()> fn);
  void close_graph(uint64_t handle);
  // Tells the daemon that step `step` of partition `handle` failed elsewhere.
  void cleanup_step(uint64_t handle, uint64_t step, const Status& why);

  // One request to the daemon's rendezvous store (a collective group's), answered by
  // `deadline`: the reply's status is the daemon's (not_found for a key not set yet).
  Result<StoreReplyMsg> store(StoreRequestMsg m, Clock::time_point deadline);

  // Sends Shutdown and waits for the daemon to close the connection.
  Status request_shutdown(const std::string& reason, Clock::time_point deadline);

  // False once the connection has closed (the daemon died or went away).
  bool alive() const;
  // The daemon's task and incarnation, from its Hello.
  const Identity& daemon() const { return daemon_; }

 private:
  DaemonClient(std::string label) : label_(std::move(label)) {}
  // Waits for `ready` or the connection's end, by `deadline`.
  Status wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, const std::function<bool()>& ready,
              const std::string& what);
  std::string who() const;
  void on_message(Message&& m);
  void on_closed(const Status& why);
  // The io thread's loop: runs io_ unless a caller drives it (see above).
  void io_loop();
  // True when a call waits for an answer that no caller is reading (mu_ held).
  bool io_wanted() const;
  // Wakes the io thread when it must take the loop back now (mu_ held).
  void want_io();
  // The fast path of run_step: this thread drives io_ until the answer or the deadline.
  Result<StepDoneMsg> drive_step(RunStepMsg m, Clock::time_point deadline);

  std::string label_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::thread io_thread_;
  std::shared_ptr<Connection> conn_;
  Identity daemon_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  std::optional<Status> closed_;
  Status close_cause_;  // why the connection closed, with its own code (closed_ says unavailable)
  uint64_t next_request_ = 1;
  std::map<uint64_t, std::optional<RegisteredMsg>> registrations_;
  std::map<uint64_t, std::optional<StepDoneMsg>> steps_;
  std::map<uint64_t, std::optional<StoreReplyMsg>> stores_;
  std::map<uint64_t, std::function<void()>> watchers_;
  std::function<void(Message&&)> other_;
  std::function<void(const Status&)> on_close_;

  // Who drives io_ (under mu_): the io thread (io_running_), one caller (caller_driving_),
  // or, between calls for up to kLinger, nobody.
  static constexpr std::chrono::milliseconds kLinger{5};
  std::condition_variable io_cv_;
  bool io_running_ = false;
  bool caller_driving_ = false;
  bool io_forced_ = false;  // the destructor or a Shutdown: the io thread runs until the end
  bool io_exit_ = false;
  Clock::time_point last_caller_{};
  // A driving caller waits in poll() on the socket and this eventfd; a thread that posts
  // a frame meanwhile writes it, so the driver runs the posted handler (its write) now.
  std::atomic<bool> driving_{false};
  std::atomic<uint64_t> posted_{0};  // handlers posted from threads that do not run the loop
  int kick_fd_ = -1;
};

}  // namespace actorflow::net
