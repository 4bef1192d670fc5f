// A gRPC callback method's request and response on a protobuf Arena that is reset and
// kept for the next call, rather than messages built and freed piece by piece with
// malloc. Under a saturating Predict load malloc and free were a tenth of the server's
// samples, much of it the messages' own parts (the inputs map, its TensorProto and its
// ~3 KiB tensor_content, the outputs): on an arena whose first block is the holder's
// own, a call of ordinary size allocates nothing, and a larger one frees its extra
// blocks when it is done.
#pragma once
#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace serve {

template <typename Request, typename Response>
class ArenaMessagePool final : public grpc::MessageAllocator<Request, Response> {
 public:
  // Keeps at most `keep` idle holders (each about kBlockBytes): the calls in flight at a
  // peak, not all of them ever made.
  explicit ArenaMessagePool(size_t keep) : keep_(keep) {}
  ~ArenaMessagePool() override = default;
  ArenaMessagePool(const ArenaMessagePool&) = delete;
  ArenaMessagePool& operator=(const ArenaMessagePool&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    std::unique_ptr<Holder> h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        h = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!h) h = std::make_unique<Holder>(this);
    h->fill();
    return h.release();
  }

 private:
  // What one call of ordinary size takes (a one-row Predict of 784 floats: ~4 KiB).
  static constexpr size_t kBlockBytes = 16 << 10;

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(ArenaMessagePool* pool) : pool_(pool), arena_(options(block_.data())) {}
    void fill() {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC is done with both messages: the arena drops them (and any blocks past its
    // first), and the holder waits for the next call.
    void Release() override {
      arena_.Reset();
      pool_->give_back(std::unique_ptr<Holder>(this));
    }

   private:
    static google::protobuf::ArenaOptions options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = kBlockBytes;
      return o;
    }
    ArenaMessagePool* pool_;
    alignas(std::max_align_t) std::array<char, kBlockBytes> block_;
    google::protobuf::Arena arena_;  // after block_, which it uses
  };

  void give_back(std::unique_ptr<Holder> h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < keep_) idle_.push_back(std::move(h));  // else freed on return
  }

  size_t keep_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Holder>> idle_;
};

}  // namespace serve
