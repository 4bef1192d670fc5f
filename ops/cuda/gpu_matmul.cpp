// MatMul and _FusedMatMul (bias, then optionally relu, as a cuBLASLt epilogue) on the
// GPU, f32. Our tensors are row-major and cuBLASLt's default is column-major, so the
// kernels ask for C^T = op(B)^T op(A)^T: the same bytes, no transposes. Batch dims must
// be equal on both sides (strided batches); broadcast batches are unimplemented.
// TF32 is off unless AF_GPU_ALLOW_TF32=1 (the session option is the next step).
#include <cstdint>
#include "actorflow/environment.h"
#include <cstdlib>
#include <initializer_list>
#include <mutex>

#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

// Read when a plan is built (once per node and shape), so a process can compare both.
bool tf32_allowed() {
  const char* v = environment_switch(EnvironmentSwitch::gpu_allow_tf32);
  return v && std::string(v) == "1";
}

struct GemmKey {
  int64_t m = -1, n = -1, k = -1, batch = -1;
  uint32_t align = 0;  // bytes every operand's address is a multiple of, up to 256
  bool operator==(const GemmKey& o) const {
    return m == o.m && n == o.n && k == o.k && batch == o.batch && align == o.align;
  }
};

// cuBLASLt's heuristic assumes 256-byte aligned operands unless told otherwise; views
// (slices) may start anywhere a float can.
uint32_t alignment_of(std::initializer_list<const void*> ptrs) {
  uint32_t a = 256;
  for (const void* p : ptrs)
    while (a > 4 && reinterpret_cast<uintptr_t>(p) % a != 0) a >>= 1;
  return a;
}

// Descriptors and the algorithm cuBLASLt picked for one shape. The last shape is kept:
// a node sees the same shape step after step, and the heuristic query costs more than
// the launch of a small product.
struct LtPlan {
  GemmKey key;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() { reset(); }
  void reset() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
    a = b = c = nullptr;
    op = nullptr;
    key = GemmKey{};
  }
};

Status make_layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t batch, int64_t batch_stride) {
  AF_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                              rows),
                   "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    AF_CUBLAS_RETURN(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                     "cublasLtMatrixLayoutSetAttribute (batch count)");
    AF_CUBLAS_RETURN(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                      sizeof(batch_stride)),
                     "cublasLtMatrixLayoutSetAttribute (batch stride)");
  }
  return Status::OK();
}

class LtMatMulKernel : public GpuOpKernel {
 public:
  LtMatMulKernel(const Node& n, bool fused)
      : GpuOpKernel(n),
        ta_(n.attr_bool("transpose_a")),
        tb_(n.attr_bool("transpose_b")),
        fused_(fused),
        relu_(fused && n.attr_bool("relu")) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, fused_ ? 3 : 2));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.rank() < 2 || b.rank() != a.rank())
      return unimplemented("the GPU MatMul takes two inputs of equal rank >= 2, got " + a.shape().to_string() + " and " +
                           b.shape().to_string());
    const int r = a.rank();
    GemmKey key;
    key.batch = 1;
    std::vector<int64_t> out_dims;
    for (int i = 0; i < r - 2; ++i) {
      if (a.dim(i) != b.dim(i))
        return unimplemented("broadcast batch dims on the GPU: " + a.shape().to_string() + " and " + b.shape().to_string());
      key.batch *= a.dim(i);
      out_dims.push_back(a.dim(i));
    }
    key.m = ta_ ? a.dim(r - 1) : a.dim(r - 2);
    key.k = ta_ ? a.dim(r - 2) : a.dim(r - 1);
    const int64_t kb = tb_ ? b.dim(r - 1) : b.dim(r - 2);
    key.n = tb_ ? b.dim(r - 2) : b.dim(r - 1);
    if (kb != key.k)
      return invalid_argument("inner dimensions differ: " + a.shape().to_string() + " and " + b.shape().to_string() +
                              " (" + std::to_string(key.k) + " vs " + std::to_string(kb) + ")");
    const float* bias = nullptr;
    if (fused_) {
      const Tensor& t = ctx.input(2);
      if (t.rank() != 1 || t.dim(0) != key.n)
        return invalid_argument("bias " + t.shape().to_string() + " does not match the " + std::to_string(key.n) +
                                " columns of the product");
      bias = static_cast<const float*>(t.raw_data());
    }
    out_dims.push_back(key.m);
    out_dims.push_back(key.n);
    Tensor& out = ctx.allocate_output(0, DType::f32, Shape(out_dims));
    key.align = alignment_of({a.raw_data(), b.raw_data(), out.raw_data()});
    if (out.num_elements() == 0) return d.compute();
    if (key.k == 0) {
      // No products to sum, and cuBLASLt refuses k = 0: the product is zeros.
      if (fused_) return unimplemented("a GPU _FusedMatMul with an empty inner dimension");
      AF_CUDA_RETURN(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), d.compute()), "cudaMemsetAsync");
      return d.compute();
    }

    // The plan's descriptors are shared by concurrent steps: the bias pointer is set and
    // the product queued under one lock.
    std::lock_guard<std::mutex> lock(mu_);
    if (!(plan_.key == key)) AF_RETURN_IF_ERROR(build_plan(d, key));
    if (bias)
      AF_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                       "cublasLtMatmulDescSetAttribute (bias)");
    const float alpha = 1.f, beta = 0.f;
    // Lt's A is our b and its B our a (see the top of the file).
    AF_CUBLAS_RETURN(cublasLtMatmul(d.lt(), plan_.op, &alpha, b.raw_data(), plan_.a, a.raw_data(), plan_.b, &beta,
                                    out.raw_data(), plan_.c, out.raw_data(), plan_.c, &plan_.algo, d.lt_workspace(),
                                    d.lt_workspace_bytes(), d.compute()),
                     "cublasLtMatmul");
    return d.compute();
  }

 private:
  Status build_plan(GpuDevice& d, const GemmKey& key) {
    plan_.reset();
    const cublasComputeType_t compute = tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    AF_CUBLAS_RETURN(cublasLtMatmulDescCreate(&plan_.op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = tb_ ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = ta_ ? CUBLAS_OP_T : CUBLAS_OP_N;
    AF_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
                     "cublasLtMatmulDescSetAttribute (transa)");
    AF_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
                     "cublasLtMatmulDescSetAttribute (transb)");
    if (fused_) {
      // The bias runs along Lt's rows, which are our columns: BiasAdd on the last dim.
      const cublasLtEpilogue_t epi = relu_ ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
      AF_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
                       "cublasLtMatmulDescSetAttribute (epilogue)");
      const cudaDataType_t bias_type = CUDA_R_32F;
      AF_CUBLAS_RETURN(
          cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
          "cublasLtMatmulDescSetAttribute (bias type)");
    }
    const int64_t m = key.m, n = key.n, k = key.k;
    AF_RETURN_IF_ERROR(make_layout(&plan_.a, tb_ ? k : n, tb_ ? n : k, key.batch, n * k));
    AF_RETURN_IF_ERROR(make_layout(&plan_.b, ta_ ? m : k, ta_ ? k : m, key.batch, m * k));
    AF_RETURN_IF_ERROR(make_layout(&plan_.c, n, m, key.batch, m * n));

    cublasLtMatmulPreference_t pref = nullptr;
    AF_CUBLAS_RETURN(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = d.lt_workspace_bytes();
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &key.align, sizeof(key.align));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(d.lt(), plan_.op, plan_.a, plan_.b, plan_.c, plan_.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    AF_CUBLAS_RETURN(st, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
      plan_.reset();
      return unimplemented("cuBLASLt has no algorithm for [" + std::to_string(m) + "x" + std::to_string(k) + "] x [" +
                           std::to_string(k) + "x" + std::to_string(n) + "]");
    }
    plan_.algo = result.algo;
    plan_.key = key;
    return Status::OK();
  }

  bool ta_, tb_, fused_, relu_;
  std::mutex mu_;
  LtPlan plan_;
};

struct MatMulKernel final : LtMatMulKernel {
  explicit MatMulKernel(const Node& n) : LtMatMulKernel(n, false) {}
};
struct FusedMatMulKernel final : LtMatMulKernel {
  explicit FusedMatMulKernel(const Node& n) : LtMatMulKernel(n, true) {}
};

AF_REGISTER_GPU_KERNEL("MatMul", MatMulKernel);
AF_REGISTER_GPU_KERNEL("_FusedMatMul", FusedMatMulKernel);

}  // namespace
}  // namespace actorflow::gpu
