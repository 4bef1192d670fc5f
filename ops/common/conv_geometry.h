// Window geometry shared by the convolution and pooling shape functions and kernels:
// attribute parsing (strides, ksize, padding) and TF's output-size / padding rule.
// Header-only and free of Eigen so defs and kernels agree on one definition.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph.h"

namespace actorflow::conv_geom {

// Far above any real image, and small enough that products of two stay within int64.
constexpr int64_t kMaxWindowDim = int64_t{1} << 30;

enum class Padding { same, valid };

// The spatial (h, w) pair of a 2- or 4-element attribute ([sh, sw] or TF's
// [1, sh, sw, 1]); false with a message when it is missing or malformed.
inline bool parse_hw(const Node& n, const char* key, int64_t* h, int64_t* w, std::string* err) {
  const AttrValue* a = n.find_attr(key);
  if (!a || !a->is<AttrValue::Ints>()) {
    *err = std::string("attribute '") + key + "' must be a list of 2 (or 4) integers";
    return false;
  }
  const auto& v = a->get<AttrValue::Ints>();
  if (v.size() == 2) {
    *h = v[0];
    *w = v[1];
  } else if (v.size() == 4) {
    if (v[0] != 1 || v[3] != 1) {
      *err = std::string("attribute '") + key + "' of 4 elements must be [1, h, w, 1]";
      return false;
    }
    *h = v[1];
    *w = v[2];
  } else {
    *err = std::string("attribute '") + key + "' must have 2 (or 4) elements, got " + std::to_string(v.size());
    return false;
  }
  if (*h < 1 || *w < 1 || *h > kMaxWindowDim || *w > kMaxWindowDim) {
    *err = std::string("attribute '") + key + "' must be positive, got [" + std::to_string(*h) + ", " +
           std::to_string(*w) + "]";
    return false;
  }
  return true;
}

inline bool parse_padding(const Node& n, Padding* p, std::string* err) {
  const AttrValue* a = n.find_attr("padding");
  const std::string s = a && a->is<std::string>() ? a->get<std::string>() : std::string("<missing>");
  if (s == "SAME") *p = Padding::same;
  else if (s == "VALID") *p = Padding::valid;
  else {
    *err = "attribute 'padding' must be \"SAME\" or \"VALID\", got \"" + s + "\"";
    return false;
  }
  return true;
}

// One spatial axis of a windowed op.
struct Axis {
  int64_t in = 0, k = 1, stride = 1, out = 0, pad_before = 0;
};

// TF's GetWindowedOutputSize: SAME gives ceil(in / stride) with the padding split evenly
// (the extra one after); VALID gives floor((in - k) / stride) + 1, which must not be
// negative. An unknown `in` (-1) gives an unknown `out`.
inline bool window(int64_t in, int64_t k, int64_t stride, Padding p, Axis* ax, std::string* err) {
  ax->in = in;
  ax->k = k;
  ax->stride = stride;
  if (in < 0) {
    ax->out = -1;
    ax->pad_before = 0;
    return true;
  }
  if (p == Padding::same) {
    ax->out = (in + stride - 1) / stride;
    const int64_t total = ax->out == 0 ? 0 : (ax->out - 1) * stride + k - in;
    ax->pad_before = total > 0 ? total / 2 : 0;
    return true;
  }
  if (in - k + stride < 0) {
    *err = "the window (" + std::to_string(k) + ") is larger than the input (" + std::to_string(in) +
           ") with VALID padding";
    return false;
  }
  ax->out = (in - k + stride) / stride;
  ax->pad_before = 0;
  return true;
}

// The operands of Conv2D and its gradients in a kernel (known shapes): an NHWC input x and
// a [KH,KW,C,O] filter f with x's channels, and both spatial windows. False with a message
// naming the shapes otherwise.
inline bool conv_operands(const Shape& x, const Shape& f, int64_t sh, int64_t sw, Padding p, Axis* ah, Axis* aw,
                          std::string* err) {
  if (x.rank() != 4 || f.rank() != 4) {
    *err = "input " + x.to_string() + " and filter " + f.to_string() + " must both have rank 4 (NHWC and [KH,KW,C,O])";
    return false;
  }
  if (x.dim(3) != f.dim(2)) {
    *err = "input " + x.to_string() + " has " + std::to_string(x.dim(3)) + " channels but filter " + f.to_string() +
           " expects " + std::to_string(f.dim(2));
    return false;
  }
  if (f.dim(0) < 1 || f.dim(1) < 1) {
    *err = "filter " + f.to_string() + " has an empty spatial dim";
    return false;
  }
  std::string why;
  if (!window(x.dim(1), f.dim(0), sh, p, ah, &why) || !window(x.dim(2), f.dim(1), sw, p, aw, &why)) {
    *err = "input " + x.to_string() + ", filter " + f.to_string() + ": " + why;
    return false;
  }
  return true;
}

// The geometry of one 2-D windowed op on NHWC input.
struct Geometry {
  int64_t n = 0, c = 0;
  Axis h, w;
};

}  // namespace actorflow::conv_geom
