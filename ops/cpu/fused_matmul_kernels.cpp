// CPU kernel of _FusedMatMul (ops/defs/fused_ops.cpp): relu(op(a) * op(b) + bias).
//
// f32 products of two matrices for which MatMul would pick oneDNN (cpu::prefer_onednn:
// the same shape classes and the same AF_MATMUL_BACKEND override) run as one oneDNN
// primitive with the bias and relu post-ops, so the output is written once; products
// of cpu::threaded_product_macs() (2^23) multiply-adds and more are cut into bands
// (cpu::gemm_band), one per pool thread, as MatMul's own oneDNN path does. Everything else (f64, batched
// operands, single rows, small products, a build without oneDNN) runs MatMul's own
// kernel (Eigen, threaded as MatMul is) and then adds the bias and applies relu in one
// pass over the output, so the op always has a kernel and the fusion pass need not know
// the build. No Eigen here: matmul_kernels.cpp stays the only matmul translation unit
// that includes it.
#include <algorithm>
#include <atomic>
#include <memory>

#include "actorflow/kernel.h"
#include "cpu/bias_relu.h"
#include "cpu/compute_type.h"
#include "cpu/onednn_matmul.h"

namespace actorflow {
namespace {

template <typename T>
void add_bias_relu(const DeviceContext* dev, T* c, const T* bias, int64_t rows, int64_t n, bool relu) {
  dev->parallel_for(rows, n + 4,
                    [&](int64_t r0, int64_t r1) { cpu::add_bias_relu_rows(c + r0 * n, bias, r1 - r0, n, relu); });
}

class FusedMatMulKernel : public OpKernel {
 public:
  explicit FusedMatMulKernel(const Node& n)
      : OpKernel(n), ta_(n.attr_bool("transpose_a")), tb_(n.attr_bool("transpose_b")), relu_(n.attr_bool("relu")) {
    Node mm;
    mm.id = n.id;
    mm.name = n.name;
    mm.op = "MatMul";
    mm.device = n.device;
    mm.attrs["transpose_a"] = AttrValue(ta_);
    mm.attrs["transpose_b"] = AttrValue(tb_);
    if (const AttrValue* t = n.find_attr("compute_type")) mm.attrs["compute_type"] = *t;
    // Any other type but float32 or bfloat16 is MatMul's kernel's to refuse, by name.
    std::string type_error;
    bf16_ = cpu::bf16_compute(n, &type_error);
    known_type_ = type_error.empty();
    mm.inputs.assign(n.inputs.begin(), n.inputs.begin() + std::min<size_t>(2, n.inputs.size()));
    mm.output_dtypes = n.output_dtypes;
    mm.output_shapes = n.output_shapes;
    auto k = KernelRegistry::global().create(mm, DeviceType::CPU);
    if (k.ok()) matmul_ = std::move(*k);
  }

  void compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    const DType t = a.dtype();
    if (t != DType::f32 && t != DType::f64) {
      ctx.fail(std::string("unsupported dtype ") + dtype_name(t));
      return;
    }
    if (b.dtype() != t || bias.dtype() != t) {
      ctx.fail(std::string("inputs differ in dtype: ") + dtype_name(t) + ", " + dtype_name(b.dtype()) + " and " +
               dtype_name(bias.dtype()));
      return;
    }
    if (a.rank() < 2 || b.rank() < 2) {
      ctx.fail("inputs must have rank >= 2, got " + a.shape().to_string() + " and " + b.shape().to_string());
      return;
    }
    const int rb = b.rank();
    const int64_t n = tb_ ? b.dim(rb - 2) : b.dim(rb - 1);
    if (bias.rank() != 1 || bias.dim(0) != n) {
      ctx.fail("bias " + bias.shape().to_string() + " does not match the " + std::to_string(n) +
               " columns of the product of " + a.shape().to_string() + " and " + b.shape().to_string());
      return;
    }
    if (t == DType::f32 && known_type_ && onednn_fused(ctx, a, b, bias)) return;
    if (!matmul_) {
      ctx.fail("no CPU kernel for MatMul");
      return;
    }
    matmul_->compute(ctx);
    if (!ctx.ok()) return;
    Tensor& out = ctx.output(0);
    if (n == 0 || out.num_elements() == 0) return;
    const int64_t rows = out.num_elements() / n;
    if (t == DType::f32) add_bias_relu(ctx.device(), out.data<float>(), bias.data<float>(), rows, n, relu_);
    else add_bias_relu(ctx.device(), out.data<double>(), bias.data<double>(), rows, n, relu_);
  }

 private:
  // One oneDNN primitive per product (or per band of rows) with the post-ops; false when
  // MatMul would not use oneDNN for this shape, or oneDNN refuses it (nothing written
  // then but a scratch output the fallback replaces).
  bool onednn_fused(OpKernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor& bias) const {
    if (a.rank() != 2 || b.rank() != 2) return false;
    cpu::GemmShape s;
    s.ta = ta_;
    s.tb = tb_;
    s.bf16 = bf16_;
    if (bf16_) {
      s.a_source = a.buffer();
      s.b_source = b.buffer();
    }
    s.m = ta_ ? a.dim(1) : a.dim(0);
    s.k = ta_ ? a.dim(0) : a.dim(1);
    s.n = tb_ ? b.dim(0) : b.dim(1);
    if ((tb_ ? b.dim(1) : b.dim(0)) != s.k) return false;  // MatMul's kernel reports it
    if (s.m == 0 || s.n == 0 || s.k == 0) return false;
    const int threads = ctx.device()->num_threads();
    // Column bands run on one thread too: the same bits on any pool (cpu::fixed_bands).
    const bool threaded = (threads > 1 || cpu::fixed_bands(s)) && s.macs() >= cpu::threaded_product_macs();
    if (!cpu::prefer_onednn(s, threaded ? threads : 1)) return false;
    Tensor& out = ctx.allocate_output(0, DType::f32, Shape({s.m, s.n}));
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* pbias = bias.data<float>();
    float* pc = out.data<float>();
    if (!threaded) return cpu::onednn_gemm_f32(s, pa, pb, pbias, relu_, pc);
    // Bands (cpu::gemm_band: rows, or columns below 2^24 multiply-adds, strides kept),
    // claimed by the caller and the pool threads (cpu::run_bands), each a single-threaded
    // primitive: see matmul_kernels.cpp.
    const int64_t bands = cpu::gemm_bands(s, threads);
    return cpu::run_bands(ctx.device(), bands, [&](int64_t i) {
      const cpu::GemmBand band = cpu::gemm_band(s, i, bands);
      return cpu::onednn_gemm_f32(band.shape, pa + band.a_offset, pb + band.b_offset, pbias + band.bias_offset, relu_,
                                  pc + band.c_offset);
    });
  }

  bool ta_, tb_, relu_;
  bool bf16_ = false, known_type_ = true;
  std::unique_ptr<OpKernel> matmul_;
};

AF_REGISTER_KERNEL("_FusedMatMul", DeviceType::CPU, FusedMatMulKernel);

}  // namespace
}  // namespace actorflow
