// Naive-loop references for the NN op tests: convolution, its backprops and pooling on
// f64 NHWC tensors, with TF's SAME / VALID geometry written out independently.
#pragma once
#include <actorflow/actorflow.h>

#include <algorithm>
#include <limits>

namespace aft::nnref {

namespace af = actorflow;

struct Geo {
  int64_t out, pad;
};

inline Geo geo(int64_t in, int64_t k, int64_t s, bool same) {
  if (same) {
    int64_t out = (in + s - 1) / s;
    int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
    return {out, total / 2};
  }
  return {(in - k) / s + 1, 0};
}

inline af::Tensor naive_conv(const af::Tensor& x, const af::Tensor& w, int64_t sh, int64_t sw, bool same) {
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  const int64_t KH = w.dim(0), KW = w.dim(1), O = w.dim(3);
  Geo gh = geo(H, KH, sh, same), gw = geo(W, KW, sw, same);
  af::Tensor y = af::Tensor::zeros(af::f64, {N, gh.out, gw.out, O});
  const double* px = x.data<double>();
  const double* pw = w.data<double>();
  double* py = y.data<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < gh.out; ++oh)
      for (int64_t ow = 0; ow < gw.out; ++ow)
        for (int64_t o = 0; o < O; ++o) {
          double acc = 0;
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t ih = oh * sh - gh.pad + kh, iw = ow * sw - gw.pad + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < C; ++c)
                acc += px[((n * H + ih) * W + iw) * C + c] * pw[((kh * KW + kw) * C + c) * O + o];
            }
          py[((n * gh.out + oh) * gw.out + ow) * O + o] = acc;
        }
  return y;
}

inline void naive_conv_backprop(const af::Tensor& x, const af::Tensor& w, const af::Tensor& dy, int64_t sh, int64_t sw,
                                bool same, af::Tensor* dx, af::Tensor* dw) {
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  const int64_t KH = w.dim(0), KW = w.dim(1), O = w.dim(3);
  Geo gh = geo(H, KH, sh, same), gw = geo(W, KW, sw, same);
  *dx = af::Tensor::zeros(af::f64, x.shape());
  *dw = af::Tensor::zeros(af::f64, w.shape());
  const double* px = x.data<double>();
  const double* pw = w.data<double>();
  const double* pg = dy.data<double>();
  double* pdx = dx->data<double>();
  double* pdw = dw->data<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < gh.out; ++oh)
      for (int64_t ow = 0; ow < gw.out; ++ow)
        for (int64_t o = 0; o < O; ++o) {
          const double g = pg[((n * gh.out + oh) * gw.out + ow) * O + o];
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              int64_t ih = oh * sh - gh.pad + kh, iw = ow * sw - gw.pad + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < C; ++c) {
                const int64_t xi = ((n * H + ih) * W + iw) * C + c, wi = ((kh * KW + kw) * C + c) * O + o;
                pdx[xi] += g * pw[wi];
                pdw[wi] += g * px[xi];
              }
            }
        }
}

inline af::Tensor naive_pool(const af::Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, bool same, bool is_max) {
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  Geo gh = geo(H, kh, sh, same), gw = geo(W, kw, sw, same);
  af::Tensor y = af::Tensor::zeros(af::f64, {N, gh.out, gw.out, C});
  const double* px = x.data<double>();
  double* py = y.data<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < gh.out; ++oh)
      for (int64_t ow = 0; ow < gw.out; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              int64_t ih = oh * sh - gh.pad + i, iw = ow * sw - gw.pad + j;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              double v = px[((n * H + ih) * W + iw) * C + c];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          py[((n * gh.out + oh) * gw.out + ow) * C + c] = is_max ? best : sum / count;
        }
  return y;
}

// dx of max pooling: each window's gradient added at the first maximum in row-major scan
// order of the part of the window inside the input.
inline af::Tensor naive_max_pool_grad(const af::Tensor& x, const af::Tensor& dy, int64_t kh, int64_t kw, int64_t sh,
                                      int64_t sw, bool same) {
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3);
  Geo gh = geo(H, kh, sh, same), gw = geo(W, kw, sw, same);
  af::Tensor dx = af::Tensor::zeros(af::f64, x.shape());
  const double* px = x.data<double>();
  const double* pg = dy.data<double>();
  double* pdx = dx.data<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < gh.out; ++oh)
      for (int64_t ow = 0; ow < gw.out; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          int64_t at = -1;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              int64_t ih = oh * sh - gh.pad + i, iw = ow * sw - gw.pad + j;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              int64_t xi = ((n * H + ih) * W + iw) * C + c;
              if (at < 0 || px[xi] > px[at]) at = xi;
            }
          if (at >= 0) pdx[at] += pg[((n * gh.out + oh) * gw.out + ow) * C + c];
        }
  return dx;
}

}  // namespace aft::nnref
