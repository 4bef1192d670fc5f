// Helpers of the cuDNN kernels (gpu_cudnn_*.cpp): scratch memory from the device's
// stream-ordered pool, and RAII for cuDNN descriptors. Host code only.
#pragma once
#include <cstdlib>
#include "actorflow/environment.h"
#include <string>

#include "cuda/gpu_cudnn.h"
#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {

// A block of the device pool for the work queued while it lives (workspaces, transposed
// filters, padded inputs). Its free is queued on the compute stream when it goes out of
// scope, after the work that uses it: the pool's frees are stream-ordered.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p_) a_->deallocate(p_, n_);
  }
  Status allocate(GpuDevice& d, size_t bytes, const char* what) {
    a_ = d.allocator();
    n_ = bytes;
    if (bytes == 0) return Status::OK();
    p_ = a_->allocate(bytes);
    if (!p_)
      return Status(Code::resource_exhausted,
                    "out of GPU memory for " + std::to_string(bytes) + " bytes of " + what);
    return Status::OK();
  }
  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }

 private:
  Allocator* a_ = nullptr;
  void* p_ = nullptr;
  size_t n_ = 0;
};

template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDesc {
 public:
  CudnnDesc() = default;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  ~CudnnDesc() {
    if (d_) Destroy(d_);
  }
  Status create() {
    if (d_) return Status::OK();
    return cudnn_status(Create(&d_), "cudnnCreate descriptor");
  }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};

using TensorDesc = CudnnDesc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = CudnnDesc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    CudnnDesc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

// cuDNN takes int dims.
inline Status cudnn_dim(int64_t v, int* out, const char* what) {
  if (v < 0 || v > INT32_MAX) return unimplemented(std::string(what) + " " + std::to_string(v) + " is too large for cuDNN");
  *out = static_cast<int>(v);
  return Status::OK();
}

// NHWC f32 [n, h, w, c].
inline Status set_nhwc(TensorDesc& t, int64_t n, int64_t h, int64_t w, int64_t c) {
  AF_RETURN_IF_ERROR(t.create());
  int in, ih, iw, ic;
  AF_RETURN_IF_ERROR(cudnn_dim(n, &in, "batch"));
  AF_RETURN_IF_ERROR(cudnn_dim(h, &ih, "height"));
  AF_RETURN_IF_ERROR(cudnn_dim(w, &iw, "width"));
  AF_RETURN_IF_ERROR(cudnn_dim(c, &ic, "channels"));
  AF_CUDNN_RETURN(cudnnSetTensor4dDescriptor(t.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, in, ic, ih, iw),
                  "cudnnSetTensor4dDescriptor");
  return Status::OK();
}

// f32 products may use TF32 tensor cores only when asked, as the matmul kernels.
inline bool cudnn_tf32_allowed() {
  const char* v = environment_switch(EnvironmentSwitch::gpu_allow_tf32);
  return v && std::string(v) == "1";
}

}  // namespace actorflow::gpu
