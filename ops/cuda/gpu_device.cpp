// GpuDevice: streams, the stream-ordered allocator, the pinned pool, events, and the
// async kernel base. Host code only (g++), so that nvcc compiles just the .cu kernels.
#include <algorithm>
#include <array>
#include <memory>

#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  // A non-sticky error must not be seen again by the next call that checks for errors.
  (void)cudaGetLastError();
  return Status(e == cudaErrorMemoryAllocation ? Code::resource_exhausted : Code::internal,
                std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Status(s == CUBLAS_STATUS_NOT_SUPPORTED ? Code::unimplemented : Code::internal,
                std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

#ifdef AF_HAVE_CUDNN
Status cudnn_status(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::OK();
  const Code c = s == CUDNN_STATUS_NOT_SUPPORTED ? Code::unimplemented
                 : s == CUDNN_STATUS_ALLOC_FAILED ? Code::resource_exhausted
                 : s == CUDNN_STATUS_BAD_PARAM    ? Code::invalid_argument
                                                  : Code::internal;
  return Status(c, std::string(what) + ": " + cudnnGetErrorString(s));
}

Result<cudnnHandle_t> GpuDevice::dnn() {
  std::lock_guard<std::mutex> lock(dnn_init_mu_);
  if (dnn_) return dnn_;
  AF_RETURN_IF_ERROR(activate());
  cudnnHandle_t h = nullptr;
  AF_CUDNN_RETURN(cudnnCreate(&h), "cudnnCreate");
  Status s = cudnn_status(cudnnSetStream(h, compute_), "cudnnSetStream");
  if (!s.ok()) {
    cudnnDestroy(h);
    return s;
  }
  dnn_ = h;
  return dnn_;
}
#endif

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Allocations and frees are queued on the compute stream, so a buffer freed once the
// kernels that read it are queued there (GpuOpKernel is done at that point) is reused
// only by work ordered after them. The copy streams hold their tensors until the host has
// seen the copy finish, so a free cannot overtake a copy; a copy stream that writes a
// fresh block first waits for the compute stream (GpuDevice::order_after).
class StreamOrderedAllocator final : public Allocator {
 public:
  StreamOrderedAllocator(int index, cudaMemPool_t pool, cudaStream_t stream)
      : index_(index), pool_(pool), stream_(stream) {}
  const char* name() const override { return "gpu_pool"; }
  DeviceId device() const override { return {DeviceType::GPU, index_}; }

  void* allocate(size_t bytes) override {
    // Zero-byte tensors still get a distinct, aligned address.
    const size_t n = round_up(std::max<size_t>(bytes, 1), 256);
    if (cudaSetDevice(index_) != cudaSuccess) return nullptr;
    void* p = nullptr;
    if (cudaMallocFromPoolAsync(&p, n, pool_, stream_) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    const int64_t now = in_use_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    allocs_.fetch_add(1);
    return p;
  }

  void deallocate(void* p, size_t bytes) override {
    if (!p) return;
    const size_t n = round_up(std::max<size_t>(bytes, 1), 256);
    // Runs wherever the last reference dies (a scheduler thread, the poller): the free
    // is queued, never waited for.
    (void)cudaSetDevice(index_);
    if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
    in_use_.fetch_sub(static_cast<int64_t>(n));
  }

  AllocatorStats stats() const override {
    AllocatorStats s;
    s.bytes_in_use = in_use_.load();
    s.peak_bytes_in_use = peak_.load();
    s.num_allocs = allocs_.load();
    uint64_t reserved = 0;
    if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess)
      s.bytes_cached = std::max<int64_t>(0, static_cast<int64_t>(reserved) - s.bytes_in_use);
    return s;
  }

  // Trimming skips blocks whose queued frees have not run yet: no need to wait for them.
  void release_cached() override {
    (void)cudaSetDevice(index_);
    (void)cudaMemPoolTrimTo(pool_, 0);
  }

 private:
  int index_;
  cudaMemPool_t pool_;
  cudaStream_t stream_;
  std::atomic<int64_t> in_use_{0}, peak_{0}, allocs_{0};
};

class GpuContext final : public DeviceContext {
 public:
  explicit GpuContext(GpuDevice* d) : d_(d) {}
  DeviceId id() const override { return {DeviceType::GPU, d_->index()}; }
  Allocator* allocator() const override { return d_->allocator(); }
  int num_threads() const override { return 1; }
  // GPU kernels do not shard on the host; host-side helpers that call this run inline.
  void parallel_for(int64_t n, int64_t, const std::function<void(int64_t, int64_t)>& fn) const override {
    if (n > 0) fn(0, n);
  }
  void* native_handle() const override { return d_; }

 private:
  GpuDevice* d_;
};

constexpr int kMaxGpus = 64;

}  // namespace

void* PinnedPool::allocate(size_t bytes, size_t* block_bytes) {
  size_t n = 4096;
  while (n < bytes) n <<= 1;
  *block_bytes = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first == n) {
        void* p = it->second;
        cached_ -= n;
        free_.erase(it);
        return p;
      }
    }
  }
  void* p = nullptr;
  if (cudaMallocHost(&p, n) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void PinnedPool::deallocate(void* p, size_t block_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + block_bytes <= cap_) {
      free_.emplace_back(block_bytes, p);
      cached_ += block_bytes;
      return;
    }
  }
  (void)cudaFreeHost(p);
}

int64_t PinnedPool::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(cached_);
}

Result<GpuDevice*> GpuDevice::get(int index) {
  static std::mutex mu;
  static std::array<GpuDevice*, kMaxGpus> devices{};
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (index < 0 || index >= count || index >= kMaxGpus)
    return Status(Code::unavailable, "no GPU " + std::to_string(index) + ": this machine has " + std::to_string(count) +
                                         (count == 1 ? " GPU" : " GPUs") + " visible to CUDA");
  std::lock_guard<std::mutex> lock(mu);
  if (devices[static_cast<size_t>(index)]) return devices[static_cast<size_t>(index)];
  // Never deleted: device tensors (fetched values, variables) may outlive every session.
  auto* d = new GpuDevice();
  Status s = d->init(index);
  if (!s.ok()) {
    delete d;  // leaks the streams it made; init failures are not retried in a loop
    return s.with_context("GPU " + std::to_string(index));
  }
  devices[static_cast<size_t>(index)] = d;
  return d;
}

Status GpuDevice::init(int index) {
  index_ = index;
  AF_RETURN_IF_ERROR(activate());
  AF_CUDA_RETURN(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  AF_CUDA_RETURN(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking), "cudaStreamCreate (host to device)");
  AF_CUDA_RETURN(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking), "cudaStreamCreate (device to host)");
  cudaMemPool_t pool = nullptr;
  AF_CUDA_RETURN(cudaDeviceGetDefaultMemPool(&pool, index), "cudaDeviceGetDefaultMemPool");
  // Keep freed memory in the pool between steps: without a threshold the pool gives it
  // back to the driver at every synchronization, and each step pays cudaMalloc again.
  uint64_t threshold = UINT64_MAX;
  AF_CUDA_RETURN(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                 "cudaMemPoolSetAttribute (release threshold)");
  allocator_ = std::make_unique<StreamOrderedAllocator>(index, pool, compute_);
  AF_CUBLAS_RETURN(cublasLtCreate(&lt_), "cublasLtCreate");
  // cuBLAS' recommendation for Hopper: 32 MiB lets it pick its fastest kernels.
  lt_workspace_bytes_ = 32u << 20;
  AF_CUDA_RETURN(cudaMalloc(&lt_workspace_, lt_workspace_bytes_), "cudaMalloc (cuBLASLt workspace)");
  context_ = std::make_unique<GpuContext>(this);
  return Status::OK();
}

Result<cudaEvent_t> GpuDevice::take_event() {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (!events_.empty()) {
      cudaEvent_t e = events_.back();
      events_.pop_back();
      return e;
    }
  }
  AF_RETURN_IF_ERROR(activate());
  cudaEvent_t e = nullptr;
  AF_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

void GpuDevice::return_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(events_mu_);
  events_.push_back(e);
}

void GpuDevice::when_done(cudaStream_t stream, std::function<void(Status)> fn,
                          std::optional<std::chrono::steady_clock::time_point> deadline) {
  Result<cudaEvent_t> e = take_event();
  if (!e.ok()) return fn(e.status());
  Status s = cuda_status(cudaEventRecord(*e, stream), "cudaEventRecord");
  if (!s.ok()) {
    return_event(*e);
    return fn(s);
  }
  watch_event(this, *e, std::move(fn), deadline);
}

Status GpuDevice::order_after(cudaStream_t waiter, cudaStream_t producer) {
  AF_ASSIGN_OR_RETURN(cudaEvent_t e, take_event());
  Status s = cuda_status(cudaEventRecord(e, producer), "cudaEventRecord");
  if (s.ok()) s = cuda_status(cudaStreamWaitEvent(waiter, e, 0), "cudaStreamWaitEvent");
  // Reusing the event at once is safe: the wait captured the recorded work already.
  return_event(e);
  return s;
}

Result<GpuDevice*> device_of(const OpKernelContext& ctx) {
  DeviceContext* d = ctx.device();
  if (!d || d->id().type != DeviceType::GPU)
    return failed_precondition("a GPU kernel was given the device " + (d ? d->id().to_string() : std::string("(none)")));
  return static_cast<GpuDevice*>(d->native_handle());
}

void GpuOpKernel::compute_async(OpKernelContext& ctx, DoneCallback done) {
  Result<GpuDevice*> dev = device_of(ctx);
  if (!dev.ok()) {
    ctx.fail(dev.status());
    return done();
  }
  GpuDevice* d = *dev;
  Result<cudaStream_t> stream = Status(Code::internal, "not enqueued");
  try {
    Status s = d->activate();
    stream = s.ok() ? enqueue(ctx, *d) : Result<cudaStream_t>(s);
  } catch (...) {
    // allocate_output throws on device OOM; nothing may cross the actor boundary.
    stream = status_from_current_exception();
  }
  if (!stream.ok()) {
    ctx.fail(stream.status());
    // Work queued before the failure may still read the inputs: finish after the
    // compute stream drains, so the inputs stay alive until then.
    d->when_done(d->compute(), [done = std::move(done)](Status) { done(); });
    return;
  }
  // Work on the compute stream is done for the graph once it is queued, as TF's GPU
  // kernels are: every later kernel is ordered after it on that stream, copies to the
  // host wait for the stream first, and buffers are freed in its order. Waiting for the
  // poller here would put a round trip to the host on every edge. An error the work
  // meets later is reported by the next wait on the stream (a copy's).
  if (*stream == d->compute()) return done();
  d->when_done(*stream, [&ctx, done = std::move(done)](Status s) {
    if (!s.ok()) ctx.fail(s);
    done();
  });
}

Status check_f32_inputs(const OpKernelContext& ctx, const GpuDevice& dev, int count) {
  for (int i = 0; i < count; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DType::f32)
      return unimplemented("input " + std::to_string(i) + " is " + t.type_string() +
                           ": the GPU kernel takes float32 only");
    if (t.device().type != DeviceType::GPU || t.device().index != dev.index())
      return invalid_argument("input " + std::to_string(i) + " is on " + t.device().to_string() + ", not gpu:" +
                              std::to_string(dev.index()) + " (a _CopyToDevice must bring it over)");
  }
  return Status::OK();
}

Result<DeviceContext*> module_device_context(int index) {
  AF_ASSIGN_OR_RETURN(GpuDevice * d, GpuDevice::get(index));
  return d->context();
}

Result<GpuMemoryStats> module_memory_stats(int index) {
  AF_ASSIGN_OR_RETURN(GpuDevice * d, GpuDevice::get(index));
  AllocatorStats a = d->allocator()->stats();
  GpuMemoryStats s;
  s.bytes_in_use = a.bytes_in_use;
  s.peak_bytes_in_use = a.peak_bytes_in_use;
  s.pinned_bytes_cached = d->pinned().bytes_cached();
  return s;
}

}  // namespace actorflow::gpu
