// CPU kernels of Concat, Split, SplitV and Slice: block copies along one axis (or one
// box), for every dtype.
#include <algorithm>

#include "actorflow/kernel.h"
#include "cpu/shape_copy.h"

namespace actorflow {
namespace {

using shape_copy::copy_block;
using shape_copy::strides_of;
using shape_copy::visit_copy_type;

// Product of dims [begin, end).
int64_t span(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s.dim(i);
  return p;
}

bool normalize(int64_t axis, int rank, int* out) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return false;
  *out = static_cast<int>(a);
  return true;
}

std::string axis_error(int64_t axis, const Shape& s) {
  return "axis " + std::to_string(axis) + " is out of range for shape " + s.to_string();
}

class ConcatKernel : public OpKernel {
 public:
  explicit ConcatKernel(const Node& n) : OpKernel(n), axis_attr_(n.attr_int("axis")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& first = ctx.input(0);
    const int r = first.rank();
    int axis = 0;
    if (r == 0 || !normalize(axis_attr_, r, &axis)) {
      ctx.fail(r == 0 ? std::string("cannot concatenate scalars") : axis_error(axis_attr_, first.shape()));
      return;
    }
    std::vector<int64_t> dims = first.shape().dims();
    int64_t total = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      bool same = x.dtype() == first.dtype() && x.rank() == r;
      for (int d = 0; same && d < r; ++d) same = d == axis || x.dim(d) == first.dim(d);
      if (!same) {
        ctx.fail("input " + std::to_string(i) + " (" + dtype_name(x.dtype()) + x.shape().to_string() +
                 ") does not match input 0 (" + dtype_name(first.dtype()) + first.shape().to_string() +
                 ") outside axis " + std::to_string(axis));
        return;
      }
      total += x.dim(axis);
    }
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, first);
      return;
    }
    dims[static_cast<size_t>(axis)] = total;
    Tensor& out = ctx.allocate_output(0, first.dtype(), Shape(dims));
    const int64_t outer = span(first.shape(), 0, axis);
    const int64_t inner = span(first.shape(), axis + 1, r);
    const DeviceContext* dev = ctx.device();
    bool ok = visit_copy_type(first.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* po = out.data<T>();
      int64_t offset = 0;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor& x = ctx.input(i);
        const int64_t run = x.dim(axis) * inner;
        // Input i fills a [outer, run] block of the [outer, total*inner] output.
        copy_block(x.data<T>(), {run, 1}, po + offset, {total * inner, 1}, {outer, run}, dev);
        offset += run;
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(first.dtype()));
  }

 private:
  int64_t axis_attr_;
};

// Split and SplitV: output j is the block [offset_j, offset_j + size_j) along the axis.
class SplitKernelBase : public OpKernel {
 public:
  using OpKernel::OpKernel;

 protected:
  void split(OpKernelContext& ctx, int axis, const std::vector<int64_t>& sizes) {
    const Tensor& x = ctx.input(0);
    if (static_cast<int>(sizes.size()) != ctx.num_outputs()) {
      ctx.fail("internal: " + std::to_string(sizes.size()) + " parts for " + std::to_string(ctx.num_outputs()) + " outputs");
      return;
    }
    const int r = x.rank();
    const int64_t outer = span(x.shape(), 0, axis);
    const int64_t inner = span(x.shape(), axis + 1, r);
    const int64_t row = x.dim(axis) * inner;
    const DeviceContext* dev = ctx.device();
    bool ok = visit_copy_type(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      int64_t offset = 0;
      for (size_t j = 0; j < sizes.size(); ++j) {
        std::vector<int64_t> dims = x.shape().dims();
        dims[static_cast<size_t>(axis)] = sizes[j];
        Tensor& out = ctx.allocate_output(static_cast<int>(j), x.dtype(), Shape(dims));
        const int64_t run = sizes[j] * inner;
        copy_block(px + offset, {row, 1}, out.data<T>(), {run, 1}, {outer, run}, dev);
        offset += run;
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }
};

class SplitKernel : public SplitKernelBase {
 public:
  explicit SplitKernel(const Node& n) : SplitKernelBase(n), num_(n.attr_int("num_split")), axis_(n.attr_int("axis")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int axis = 0;
    if (!normalize(axis_, x.rank(), &axis)) {
      ctx.fail(axis_error(axis_, x.shape()));
      return;
    }
    const int64_t d = x.dim(axis);
    if (num_ < 1 || d % num_ != 0) {
      ctx.fail("dim " + std::to_string(axis) + " of shape " + x.shape().to_string() + " (" + std::to_string(d) +
               ") is not divisible into " + std::to_string(num_) + " equal parts");
      return;
    }
    split(ctx, axis, std::vector<int64_t>(static_cast<size_t>(num_), d / num_));
  }

 private:
  int64_t num_, axis_;
};

class SplitVKernel : public SplitKernelBase {
 public:
  explicit SplitVKernel(const Node& n) : SplitKernelBase(n), sizes_(n.attr_ints("sizes")), axis_(n.attr_int("axis")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int axis = 0;
    if (!normalize(axis_, x.rank(), &axis)) {
      ctx.fail(axis_error(axis_, x.shape()));
      return;
    }
    const int64_t d = x.dim(axis);
    std::vector<int64_t> sizes = sizes_;
    int64_t sum = 0;
    int inferred = -1;
    bool bad = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == -1 && inferred < 0) inferred = static_cast<int>(i);
      else if (sizes[i] < 0) bad = true;
      else sum += sizes[i];
    }
    if (bad || (inferred >= 0 ? sum > d : sum != d)) {
      ctx.fail("sizes " + Shape(sizes_).to_string() + " do not add up to dim " + std::to_string(axis) + " of shape " +
               x.shape().to_string());
      return;
    }
    if (inferred >= 0) sizes[static_cast<size_t>(inferred)] = d - sum;
    split(ctx, axis, sizes);
  }

 private:
  std::vector<int64_t> sizes_;
  int64_t axis_;
};

class SliceKernel : public OpKernel {
 public:
  explicit SliceKernel(const Node& n) : OpKernel(n), begin_(n.attr_ints("begin")), size_(n.attr_ints("size")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int r = x.rank();
    if (static_cast<int>(begin_.size()) != r || static_cast<int>(size_.size()) != r) {
      ctx.fail("begin " + Shape(begin_).to_string() + " and size " + Shape(size_).to_string() +
               " do not match the rank of shape " + x.shape().to_string());
      return;
    }
    std::vector<int64_t> dims(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) {
      const size_t k = static_cast<size_t>(i);
      const int64_t b = begin_[k], s = size_[k], d = x.dim(i);
      if (b < 0 || b > d || s < -1 || (s >= 0 && s > d - b)) {
        ctx.fail(out_of_range("slice begin " + Shape(begin_).to_string() + " size " + Shape(size_).to_string() +
                              " is out of bounds of shape " + x.shape().to_string() + " in dim " + std::to_string(i)));
        return;
      }
      dims[k] = s >= 0 ? s : d - b;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), Shape(dims));
    const std::vector<int64_t> in_strides = strides_of(x.shape().dims());
    int64_t start = 0;
    for (int i = 0; i < r; ++i) start += begin_[static_cast<size_t>(i)] * in_strides[static_cast<size_t>(i)];
    if (out.num_elements() == 0) return;
    bool ok = visit_copy_type(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_block(x.data<T>() + start, in_strides, out.data<T>(), strides_of(dims), dims, ctx.device());
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }

 private:
  std::vector<int64_t> begin_, size_;
};

AF_REGISTER_KERNEL("Concat", DeviceType::CPU, ConcatKernel);
AF_REGISTER_KERNEL("Split", DeviceType::CPU, SplitKernel);
AF_REGISTER_KERNEL("SplitV", DeviceType::CPU, SplitVKernel);
AF_REGISTER_KERNEL("Slice", DeviceType::CPU, SliceKernel);

}  // namespace
}  // namespace actorflow
