// NcclGroup (actorflow/ops/nccl_group.h): NCCL's all-reduce and broadcast on the GPU's
// compute stream, so that they are ordered after the kernels that made the gradients and
// before the updates that read them, with no host wait between. libnccl.so.2 is opened
// the first time a group is made (its symbols through dlsym), not linked: the module
// loads on a machine without NCCL, and finds a newer NCCL (a wheel's) on the library path.
#include "actorflow/ops/nccl_group.h"

#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "cuda/gpu_runtime.h"

#ifdef AF_HAVE_NCCL
#include <nccl.h>
#endif

namespace actorflow::gpu {

#ifndef AF_HAVE_NCCL

Result<std::shared_ptr<NcclGroup>> module_nccl_group(std::shared_ptr<CollectiveGroup>, const NcclGroupOptions&) {
  return Status(Code::unavailable, "this CUDA module was built without NCCL's header (nccl.h): no GPU collectives");
}

#else

namespace {

using Clock = std::chrono::steady_clock;

// The NCCL entry points we call, from the library found at run time.
struct NcclApi {
  ncclResult_t (*get_version)(int*);
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*comm_abort)(ncclComm_t);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  const char* (*get_error_string)(ncclResult_t);
  const char* (*get_last_error)(ncclComm_t);
  std::string version;
};

Result<const NcclApi*> nccl_api() {
  static const Result<const NcclApi*> api = []() -> Result<const NcclApi*> {
    void* h = nullptr;
    std::string tried;
    for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
      if ((h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
      const char* e = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
    }
    if (!h)
      return Status(Code::unavailable, "NCCL is not on this machine's library path (" + tried +
                                           "): install it with the CUDA toolkit or the nvidia-nccl-cu13 wheel");
    auto* a = new NcclApi();
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    sym(a->get_version, "ncclGetVersion");
    sym(a->get_unique_id, "ncclGetUniqueId");
    sym(a->comm_init_rank_config, "ncclCommInitRankConfig");
    sym(a->comm_get_async_error, "ncclCommGetAsyncError");
    sym(a->comm_abort, "ncclCommAbort");
    sym(a->all_reduce, "ncclAllReduce");
    sym(a->broadcast, "ncclBroadcast");
    sym(a->group_start, "ncclGroupStart");
    sym(a->group_end, "ncclGroupEnd");
    sym(a->get_error_string, "ncclGetErrorString");
    sym(a->get_last_error, "ncclGetLastError");
    if (!missing.empty()) {
      delete a;
      return Status(Code::unavailable, "the NCCL library found lacks " + missing + " (NCCL 2.14 or later is needed)");
    }
    int v = 0;
    (void)a->get_version(&v);
    // 2.9 and later encode the version as major * 10000 + minor * 100 + patch.
    a->version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    return static_cast<const NcclApi*>(a);
  }();
  return api;
}

Result<ncclDataType_t> nccl_type(DType t, bool sums) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    default: break;
  }
  if (!sums) switch (t) {
      case DType::i32: return ncclInt32;
      case DType::i64: return ncclInt64;
      case DType::u8:
      case DType::boolean: return ncclUint8;
      default: break;
    }
  return invalid_argument(std::string("NCCL cannot ") + (sums ? "sum " : "send ") + dtype_name(t) + " tensors");
}

class NcclGroupImpl final : public NcclGroup, public std::enable_shared_from_this<NcclGroupImpl> {
 public:
  NcclGroupImpl(std::shared_ptr<CollectiveGroup> host, NcclGroupOptions o, GpuDevice* dev, const NcclApi* api)
      : host_(std::move(host)), o_(o), dev_(dev), api_(api), failed_(failed_precondition("the NCCL group is not formed")) {}
  ~NcclGroupImpl() override {
    std::lock_guard<std::mutex> lock(mu_);
    drop_comm_locked();
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  uint64_t bytes_sent() const override { return bytes_.load(); }
  std::string nccl_version() const override { return api_->version; }

  Status form(Clock::time_point deadline) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop_comm_locked();
      failed_ = failed_precondition("the NCCL group is being formed");
    }
    // Rank 0's id, through the host group.
    Tensor id(DType::u8, Shape{static_cast<int64_t>(sizeof(ncclUniqueId))});
    if (rank() == 0) {
      ncclUniqueId u;
      AF_RETURN_IF_ERROR(check(api_->get_unique_id(&u), "ncclGetUniqueId"));
      std::memcpy(id.raw_data(), &u, sizeof u);
    }
    Tensor got(DType::u8, id.shape());
    struct Wait {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Status s;
    };
    auto w = std::make_shared<Wait>();
    host_->broadcast({id}, {got}, [w](Status s) {
      std::lock_guard<std::mutex> lock(w->mu);
      w->done = true;
      w->s = s;
      w->cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> lock(w->mu);
      if (!w->cv.wait_until(lock, deadline, [&] { return w->done; }))
        return deadline_exceeded("the NCCL id did not reach rank " + std::to_string(rank()) + " by the deadline");
      if (!w->s.ok()) return Status(w->s.code(), "broadcasting the NCCL id: " + w->s.message());
    }
    ncclUniqueId u;
    std::memcpy(&u, got.raw_data(), sizeof u);

    AF_RETURN_IF_ERROR(dev_->activate());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a member that never comes is waited for only to the deadline
    ncclComm_t comm = nullptr;
    ncclResult_t r = api_->comm_init_rank_config(&comm, size(), u, rank(), &config);
    if (r != ncclSuccess && r != ncclInProgress) return check(r, "ncclCommInitRankConfig", comm);
    Status s = wait_in_progress(comm, deadline, "ncclCommInitRankConfig");
    if (!s.ok()) {
      if (comm) (void)api_->comm_abort(comm);
      return Status(s.code(), "forming the NCCL group of " + std::to_string(size()) + " on gpu:" +
                                  std::to_string(o_.gpu) + " (rank " + std::to_string(rank()) + "): " + s.message());
    }
    flush_waiting();  // they fail on failed_ (being formed)
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = comm;
    failed_ = Status::OK();
    next_bucket_ = 0;
    return Status::OK();
  }

  void all_reduce(std::vector<Tensor> inputs, std::vector<Tensor> outputs, int bucket, int num_buckets, bool average,
                  Done done) override {
    bool host_side = false;
    Status s = check_tensors(inputs, outputs, true, &host_side);
    if (!s.ok()) return done(s);
    if (host_side) return host_->all_reduce(std::move(inputs), std::move(outputs), bucket, num_buckets, average, std::move(done));
    if (num_buckets < 1 || bucket < 0 || bucket >= num_buckets)
      return done(invalid_argument("bucket " + std::to_string(bucket) + " of " + std::to_string(num_buckets)));
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    // Every member must queue a step's buckets in one order (NCCL matches calls by
    // order): bucket b waits here until b - 1 has been queued. Queuing happens under
    // order_mu_, so two threads cannot queue their buckets the other way round.
    waiting_[bucket] = [this, in = std::move(inputs), out = std::move(outputs), average,
                        done = std::move(done)]() mutable { run_all_reduce(in, out, average, std::move(done)); };
    while (!waiting_.empty() && waiting_.begin()->first == next_bucket_) {
      auto f = std::move(waiting_.begin()->second);
      waiting_.erase(waiting_.begin());
      next_bucket_ = (next_bucket_ + 1) % num_buckets;
      f();
    }
  }

  void broadcast(std::vector<Tensor> inputs, std::vector<Tensor> outputs, Done done) override {
    // Host tensors (a step counter) go through the host group, GPU tensors through NCCL;
    // `done` once both are through.
    std::vector<Tensor> hin, hout, din, dout;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i >= outputs.size()) return done(invalid_argument("broadcast: fewer outputs than inputs"));
      const bool on_gpu = inputs[i].device().type == DeviceType::GPU;
      if (on_gpu != (outputs[i].device().type == DeviceType::GPU))
        return done(invalid_argument("broadcast: input " + std::to_string(i) + " and its output are on different devices"));
      (on_gpu ? din : hin).push_back(inputs[i]);
      (on_gpu ? dout : hout).push_back(outputs[i]);
    }
    bool host_side = false;
    if (!din.empty()) {
      Status s = check_tensors(din, dout, false, &host_side);
      if (!s.ok()) return done(s);
    }
    struct Join {
      std::mutex mu;
      int left = 0;
      Status s;
      Done done;
    };
    auto j = std::make_shared<Join>();
    j->left = (hin.empty() ? 0 : 1) + (din.empty() ? 0 : 1);
    j->done = std::move(done);
    if (j->left == 0) return j->done(Status::OK());
    auto part = [j](Status s) {
      Done d;
      Status out;
      {
        std::lock_guard<std::mutex> lock(j->mu);
        if (!s.ok() && j->s.ok()) j->s = s;
        if (--j->left > 0) return;
        d = std::move(j->done);
        out = j->s;
      }
      d(out);
    };
    if (!hin.empty()) host_->broadcast(std::move(hin), std::move(hout), part);
    if (!din.empty()) run_broadcast(din, dout, part);
  }

 private:
  Status check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) const {
    if (r == ncclSuccess) return Status::OK();
    const char* last = api_->get_last_error(comm);
    std::string m = std::string(what) + ": " + api_->get_error_string(r) + (last && *last ? std::string(" (") + last + ")" : "");
    const Code c = r == ncclInvalidArgument || r == ncclInvalidUsage ? Code::invalid_argument
                   : r == ncclRemoteError || r == ncclSystemError    ? Code::unavailable
                                                                      : Code::internal;
    return Status(c, m);
  }

  // A nonblocking communicator's calls return ncclInProgress and finish in the
  // background; the result is the communicator's async error once it leaves that state.
  Status wait_in_progress(ncclComm_t comm, Clock::time_point deadline, const char* what) const {
    for (int spins = 0;; ++spins) {
      ncclResult_t state = ncclInProgress;
      ncclResult_t r = api_->comm_get_async_error(comm, &state);
      if (r != ncclSuccess) return check(r, "ncclCommGetAsyncError", comm);
      if (state != ncclInProgress) return check(state, what, comm);
      if (Clock::now() >= deadline)
        return deadline_exceeded(std::string(what) + " did not finish by the deadline (a member missing?)");
      if (spins < 100) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // Inputs and outputs of one op: all on this group's GPU (NCCL), or all on the host
  // (*host_side: the host group's).
  Status check_tensors(const std::vector<Tensor>& in, const std::vector<Tensor>& out, bool sums, bool* host_side) const {
    if (in.empty() || in.size() != out.size()) return invalid_argument("a collective needs as many outputs as inputs, and one or more");
    int on_gpu = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      for (const Tensor* t : {&in[i], &out[i]}) {
        if (t->device().type != DeviceType::GPU) continue;
        ++on_gpu;
        if (t->device().index != o_.gpu)
          return invalid_argument("tensor " + std::to_string(i) + " is on " + t->device().to_string() +
                                  ", but this NCCL group reduces on gpu:" + std::to_string(o_.gpu));
      }
      if (in[i].dtype() != out[i].dtype() || in[i].num_elements() != out[i].num_elements())
        return invalid_argument("tensor " + std::to_string(i) + ": its output differs from its input in dtype or size");
      AF_RETURN_IF_ERROR(nccl_type(in[i].dtype(), sums).status());
    }
    if (on_gpu != 0 && on_gpu != static_cast<int>(2 * in.size()))
      return invalid_argument("one collective op holds host and GPU tensors: place it on one device");
    *host_side = on_gpu == 0;
    return Status::OK();
  }

  // Queues `enqueue` (NCCL calls in one group) on the compute stream, then calls `done`
  // when the stream has passed them, or with the error; a failure aborts the
  // communicator, which also ends kernels still waiting for a lost member.
  void run(const char* what, const std::function<Status(ncclComm_t)>& enqueue, uint64_t bytes, Done done) {
    ncclComm_t comm;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) {
        Status f = failed_;
        return done(f);
      }
      comm = comm_;
    }
    Status s = dev_->activate();
    if (s.ok()) s = check(api_->group_start(), "ncclGroupStart", comm);
    if (s.ok()) {
      Status e = enqueue(comm);
      ncclResult_t r = api_->group_end();
      if (e.ok()) e = r == ncclInProgress ? Status::OK() : check(r, "ncclGroupEnd", comm);
      // Later work goes on the stream only once NCCL's kernels are on it.
      if (e.ok() && r == ncclInProgress)
        e = wait_in_progress(comm, Clock::now() + std::chrono::milliseconds(o_.timeout_ms), what);
      s = e;
    }
    if (!s.ok()) return fail(comm, Status(s.code(), std::string(what) + ": " + s.message()), std::move(done));
    bytes_ += bytes;
    dev_->when_done(
        dev_->compute(),
        [this, self = shared_from_this(), comm, what, done = std::move(done)](Status s) mutable {
          if (s.ok()) {
            ncclResult_t state = ncclSuccess;
            if (api_->comm_get_async_error(comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
              s = check(state, what, comm);
          }
          if (s.ok()) return done(s);
          if (s.code() == Code::deadline_exceeded)
            s = deadline_exceeded(std::string(what) + " did not finish within " + std::to_string(o_.timeout_ms) +
                                  " ms: a member of the group of " + std::to_string(size()) + " is lost or stalled");
          fail(comm, s, std::move(done));
        },
        Clock::now() + std::chrono::milliseconds(o_.timeout_ms));
  }

  void fail(ncclComm_t comm, Status s, Done done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (comm_ == comm) {
        drop_comm_locked();
        failed_ = Status(s.code() == Code::invalid_argument ? Code::invalid_argument : Code::unavailable,
                         "the NCCL group failed: " + s.message());
      }
    }
    // Buckets still waiting for their turn would wait for a step that has ended.
    flush_waiting();
    done(s);
  }

  // Runs the buckets waiting for their turn; with failed_ set, each fails at once.
  void flush_waiting() {
    std::map<int, std::function<void()>> left;
    {
      std::lock_guard<std::recursive_mutex> order(order_mu_);
      left.swap(waiting_);
      next_bucket_ = 0;
    }
    for (auto& [b, f] : left) f();
  }

  void run_all_reduce(std::vector<Tensor>& in, std::vector<Tensor>& out, bool average, Done done) {
    uint64_t bytes = 0;
    for (const Tensor& t : in) bytes += t.bytes();
    const int n = size();
    const uint64_t sent = n > 1 ? bytes * 2 * static_cast<uint64_t>(n - 1) / static_cast<uint64_t>(n) : 0;
    auto enqueue = [&, average](ncclComm_t comm) -> Status {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].num_elements() == 0) continue;
        AF_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_type(in[i].dtype(), true));
        AF_RETURN_IF_ERROR(check(api_->all_reduce(in[i].raw_data(), out[i].raw_data(), static_cast<size_t>(in[i].num_elements()),
                                                  t, average ? ncclAvg : ncclSum, comm, dev_->compute()),
                                 "ncclAllReduce", comm));
      }
      return Status::OK();
    };
    // The inputs live until the stream has passed the op.
    run("the NCCL all-reduce", enqueue, sent, [in, done = std::move(done)](Status s) { done(s); });
  }

  void run_broadcast(std::vector<Tensor>& in, std::vector<Tensor>& out, Done done) {
    uint64_t bytes = 0;
    for (const Tensor& t : in) bytes += t.bytes();
    auto enqueue = [&](ncclComm_t comm) -> Status {
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].num_elements() == 0) continue;
        AF_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_type(in[i].dtype(), false));
        AF_RETURN_IF_ERROR(check(api_->broadcast(in[i].raw_data(), out[i].raw_data(), static_cast<size_t>(in[i].num_elements()), t,
                                                 0, comm, dev_->compute()),
                                 "ncclBroadcast", comm));
      }
      return Status::OK();
    };
    run("the NCCL broadcast", enqueue, rank() == 0 ? bytes : 0, [in, done = std::move(done)](Status s) { done(s); });
  }

  void drop_comm_locked() {
    if (comm_) (void)api_->comm_abort(comm_);
    comm_ = nullptr;
  }

  std::shared_ptr<CollectiveGroup> host_;
  const NcclGroupOptions o_;
  GpuDevice* dev_;
  const NcclApi* api_;
  std::mutex mu_;  // comm_ and failed_
  ncclComm_t comm_ = nullptr;
  Status failed_;
  std::recursive_mutex order_mu_;  // waiting_ and next_bucket_, and queuing in their order
  int next_bucket_ = 0;
  std::map<int, std::function<void()>> waiting_;
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace

Result<std::shared_ptr<NcclGroup>> module_nccl_group(std::shared_ptr<CollectiveGroup> host, const NcclGroupOptions& o) {
  if (!host) return invalid_argument("nccl_group: no host group to carry the rendezvous");
  if (o.timeout_ms <= 0) return invalid_argument("nccl_group: timeout_ms must be positive");
  AF_ASSIGN_OR_RETURN(GpuDevice * dev, GpuDevice::get(o.gpu));
  AF_ASSIGN_OR_RETURN(const NcclApi* api, nccl_api());
  return std::shared_ptr<NcclGroup>(std::make_shared<NcclGroupImpl>(std::move(host), o, dev, api));
}

#endif  // AF_HAVE_NCCL

}  // namespace actorflow::gpu
