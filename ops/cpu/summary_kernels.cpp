// CPU kernels of the summary ops. The Summary encoding is the engine's, the one
// SummaryWriter uses (actorflow/summary.h).
#include "actorflow/kernel.h"
#include "actorflow/summary.h"

namespace actorflow {
namespace {

Tensor string_scalar(std::string s) { return Tensor::scalar(std::move(s)); }

class ScalarSummaryKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& tags = ctx.input(0);
    const Tensor& values = ctx.input(1);
    if (tags.shape() != values.shape()) {
      ctx.fail("tags " + tags.type_string() + " and values " + values.type_string() + " must have the same shape");
      return;
    }
    // Concatenated Summaries are one Summary holding all their values.
    std::string out;
    const std::string* t = tags.data<std::string>();
    for (int64_t i = 0; i < values.num_elements(); ++i)
      out += encode_scalar_summary(t[i], static_cast<float>(values.element_as_double(i)));
    ctx.set_output(0, string_scalar(std::move(out)));
  }
};

class HistogramSummaryKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& tag = ctx.input(0);
    if (tag.num_elements() != 1) {
      ctx.fail("tag must be a string scalar, got " + tag.type_string());
      return;
    }
    auto summary = encode_histogram_summary(tag.data<std::string>()[0], ctx.input(1));
    if (!summary.ok()) {
      ctx.fail(summary.status());
      return;
    }
    ctx.set_output(0, string_scalar(std::move(*summary)));
  }
};

class MergeSummaryKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    std::vector<std::string_view> inputs;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& in = ctx.input(i);
      const std::string* s = in.data<std::string>();
      for (int64_t k = 0; k < in.num_elements(); ++k) inputs.emplace_back(s[k]);
    }
    auto merged = merge_summaries(inputs);
    if (!merged.ok()) {
      ctx.fail(merged.status());
      return;
    }
    ctx.set_output(0, string_scalar(std::move(*merged)));
  }
};

AF_REGISTER_KERNEL("ScalarSummary", DeviceType::CPU, ScalarSummaryKernel);
AF_REGISTER_KERNEL("HistogramSummary", DeviceType::CPU, HistogramSummaryKernel);
AF_REGISTER_KERNEL("MergeSummary", DeviceType::CPU, MergeSummaryKernel);

}  // namespace
}  // namespace actorflow
