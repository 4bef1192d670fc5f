// One authenticated daemon connection over an Asio TCP socket, used by both ends: the
// handshake first (handshake.h), then frames in both directions, heartbeats both ways, a
// queue of gathered writes, and one close() that runs once and says why.
//
// A frame's payload (frame.h) is written straight from its tensors' buffers (a gathered
// write) and read straight into the receiving tensors once it is large enough to be worth
// a read of its own.
//
// Threading: every member runs on the socket's executor (one io thread per io_context
// here, so no strand is needed), but the write queue, which write_mu_ guards; send() and
// close() may be called from any thread. send() writes at once from the calling thread
// when nothing is queued (plain TCP, authenticated: one non-blocking sendmsg under
// write_mu_; what the socket does not take is left to the io thread), else queues the
// frame behind the others, in call order. Handlers are called on the io thread and must
// not block. A thread that holds the loop while no
// thread runs the io_context (DaemonClient's fast path) may call the *_owned members:
// it then plays the io thread's part, with blocking waits of its own.
//
// Writes go out with one non-blocking gathered sendmsg when nothing is queued before
// them (most frames leave whole, with no completion handler to run after); what the
// socket does not take is written by an async write. After a short read (the socket held
// no more), plain TCP waits for readiness and then reads, instead of asio's read at once
// that would find nothing: one syscall fewer per frame on a request/answer path.
//
// Before authentication the connection reads exactly the bytes the frame reader still
// wants, and at most kMaxPreAuthFrameBytes (768) in all (a genuine Hello and AuthProof
// are under 300 bytes, 480 at the task name's limit: tests/net/test_net_frame.cpp checks), so
// an unauthenticated peer can make it hold almost nothing.
#pragma once
#include <asio.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "frame.h"
#include "frame_messages.h"
#include "handshake.h"
#include "tls.h"

namespace actorflow::net {

struct ConnectionOptions {
  // Frames after the handshake may be this large (--max_message_bytes).
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
  // A Heartbeat is sent this often; a peer silent for idle_timeout_ms is taken as dead.
  int heartbeat_ms = 1000;
  int idle_timeout_ms = 10000;
  // The handshake must finish within this.
  int handshake_timeout_ms = 5000;
  // TLS under the handshake (tls.h): null for plain TCP; `tls_server` for the accepting end.
  std::shared_ptr<asio::ssl::context> tls;
  bool tls_server = false;
  // The dialing end: the daemon's certificate must name this host (a DNS name, or an IP
  // address in its subjectAltName), not only be signed by the CA.
  std::string tls_host;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Handlers {
    std::function<void(const Identity& peer)> on_ready;  // authenticated
    std::function<void(Message&& m)> on_message;         // every frame after that, but heartbeats
    std::function<void(const Status& why)> on_closed;    // exactly once
  };

  // `label` names the peer in messages ("127.0.0.1:40312").
  static std::shared_ptr<Connection> create(asio::ip::tcp::socket socket, Handshake handshake, ConnectionOptions options,
                                            std::string label);
  ~Connection();

  // Sends our Hello and starts reading. Call once.
  void start(Handlers handlers);
  // Queues a message (dropped once closed).
  void send(Message m);
  // The same, unless its frame is over what the peer announced it accepts (its
  // --max_message_bytes) or what a frame header can state: then nothing is sent, the
  // connection stays up, and the error says so.
  Status send_checked(const Message& m);
  // Closes the socket and reports `why` to on_closed, once.
  void close(Status why);
  // The same once every queued frame has been written (a draining daemon's last
  // StepDone frames), or after `grace_ms` at most.
  void close_after_writes(Status why, int grace_ms);

  // ---- for the thread that holds the loop (no thread runs the io_context) ----
  // True when read_owned may be used: plain TCP, authenticated, open, and the read that
  // is pending on the io_context targets the read buffer (not a tensor's payload).
  bool can_read_owned() const;
  // True when no frame waits to be written.
  bool writes_idle() const {
    std::lock_guard<std::mutex> lock(write_mu_);
    return writes_.empty() && !writing_;
  }
  // send_checked, writing now on this thread.
  Status send_owned(const Message& m);
  enum class Wait { data, timeout, kicked };
  // Reads what the socket holds, or waits for it until `until` (or until `kick_fd`, an
  // eventfd, is written: it is then drained), and hands every frame to the handlers on
  // this thread. An error closes the connection (on_closed has run) and is returned.
  // With `wait_first`, it waits before its first read (right after sending a request).
  Result<Wait> read_owned(std::chrono::steady_clock::time_point until, int kick_fd, bool wait_first = false);
  // Called after a frame or a close was posted from a thread that does not run the
  // loop (so a caller that holds it can run the posted handlers). Set before start().
  void set_post_hook(std::function<void()> hook) { post_hook_ = std::move(hook); }
  int heartbeat_ms() const { return options_.heartbeat_ms; }

  const std::string& label() const { return label_; }
  const Identity& peer() const { return handshake_.peer(); }
  uint64_t peer_max_message_bytes() const { return handshake_.peer_max_message_bytes(); }

 private:
  Connection(asio::ip::tcp::socket socket, Handshake handshake, ConnectionOptions options, std::string label);
  void do_close(Status why);
  void begin();  // after TLS (if any): our Hello, then reading
  void read_more();
  void read_when_ready();
  void on_bytes(size_t n);
  Status on_frame(RawFrame&& frame);
  Status deliver(Message&& m);
  Status on_payload_done();
  Result<std::shared_ptr<OutFrame>> encode_checked(const Message& m) const;
  bool on_loop_thread();
  void posted();
  void queue_write(OutFrame frame);
  void write_next();
  // Writes the front frame's rest now, without blocking: true when it all went.
  Result<bool> write_front_now();
  void arm_heartbeat();

  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> tls_;  // over socket_, when TLS is on
  Handshake handshake_;
  ConnectionOptions options_;
  std::string label_;
  Handlers handlers_;
  FrameReader reader_;
  std::vector<char> buffer_;
  std::optional<Message> pending_;  // its payload is still arriving
  // The write queue: any thread may add to it, under write_mu_ (see above).
  mutable std::mutex write_mu_;
  std::deque<OutFrame> writes_;
  size_t front_written_ = 0;  // bytes of writes_.front() already sent
  bool writing_ = false;       // the io thread owns the queue's front (a write, or one posted)
  bool write_closed_ = false;  // closed_, for the writers of other threads
  std::atomic<bool> direct_ok_{false};  // plain TCP, authenticated: other threads may write
  bool read_direct_ = false;  // the pending read targets a payload window, not buffer_
  bool drained_ = false;      // the last read came back short: the socket held no more
  std::function<void()> post_hook_;
  bool closed_ = false;
  bool closing_ = false;
  Status closing_why_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer heartbeat_timer_;
  std::chrono::steady_clock::time_point last_rx_;
  uint64_t preauth_bytes_ = 0;
};

}  // namespace actorflow::net
