// f32 2-D convolution (forward, input and filter gradients) through oneDNN, beside the
// im2col + Eigen GEMM of conv_kernels.cpp. Without oneDNN at configure time these return
// false and the Eigen path runs.
#pragma once
#include <cstdint>

namespace actorflow::cpu {

// NHWC input [n,h,w,c], filter [kh,kw,c,o] (TF's layout), output [n,oh,ow,o]; stride
// (sh,sw); pad_t/pad_l before the first row/column (TF's SAME/VALID rule, computed by the
// caller), the rest implied by the output size.
struct ConvDims {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t kh = 0, kw = 0, o = 0;
  int64_t oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, pad_t = 0, pad_l = 0;
};

// Which implementation Conv2D's f32 kernels (and their gradients) use (tests and benchmarks force one).
enum class ConvBackend { automatic, eigen, onednn };
void set_conv_backend(ConvBackend b);
ConvBackend conv_backend();
// The automatic choice: oneDNN when it is built in (it measured faster on the CNN's
// convolutions, bench/README.md), unless forced.
bool prefer_onednn_conv();

// y = conv(x, w) for images [0, d.n) of a batch (the caller shards images over its pool;
// each call runs on the calling thread only, see onednn_matmul.h), through a primitive
// cached per shape. With `bias` ([d.o]) y gets it added per channel, and with `relu`
// then max(0, .), as oneDNN post-ops. False (y untouched) when oneDNN is not built in or
// rejects the shape.
//
// With `bf16` the operands (x, the filter, dy) are rounded to bfloat16 and the sums kept
// in float32 (ComputeTypeScope in graph.h); where bfloat16 does not pay
// (onednn_bf16_available, onednn_matmul.h) the float32 primitive runs.
bool onednn_conv2d_f32(const ConvDims& d, const float* x, const float* w, float* y, const float* bias = nullptr,
                       bool relu = false, bool bf16 = false);
// dx = the gradient of the convolution with respect to x (Conv2DBackpropInput), for the
// images of d; dy is [n,oh,ow,o].
bool onednn_conv2d_backprop_input_f32(const ConvDims& d, const float* w, const float* dy, float* dx, bool bf16 = false);
// dw = the gradient with respect to the filter summed over the images of d (overwritten,
// [kh,kw,c,o]); the caller adds the partial sums of its shards in a fixed order. With
// fewer than 8 input channels it runs in float32 even when `bf16` asks otherwise: there
// the float32 kernel is the faster (the exact gradient, not a rounded one). In bfloat16
// with stride 1 on AMX it runs as a forward convolution of x's channels by dy (oneDNN's
// faster kernels; onednn_conv.cpp).
bool onednn_conv2d_backprop_filter_f32(const ConvDims& d, const float* x, const float* dy, float* dw,
                                       bool bf16 = false);

}  // namespace actorflow::cpu
