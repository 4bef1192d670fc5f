// CPU kernel of _FusedElementwise (ops/defs/fused_elementwise_ops.cpp): a program of f32
// elementwise ops evaluated in one pass over the data, in blocks small enough that the
// block of every live intermediate stays in L1/L2, so no intermediate tensor is ever
// written to memory. Per block, each instruction is one plain loop over the block (the
// op is a template parameter, so it inlines and vectorizes as unary_kernels.cpp's do);
// the element ranges are sharded over the intra-op pool like the other elementwise
// kernels.
//
// Each instruction computes exactly what the op's own kernel computes, with the same
// expressions and unary_math.h functions, in the same order, so a fused chain gives the
// bits the unfused nodes give.
//
// The one-pass path needs every input to have the output's shape or a single element
// (the shapes the fusion pass admits). With partially known static shapes a step may
// bring others ([1,3] beside [2,3]); such steps run the program op by op through the
// ops' own kernels, which broadcast (or fail) exactly as the unfused nodes would.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/ops/fused_elementwise.h"
#include "cpu/unary_math.h"

namespace actorflow {
namespace {

namespace fe = fused_elementwise;
namespace um = unary_math;
using fe::Code;

// 4 KiB per register: the blocks of a few registers, the inputs and the output fit in L1.
constexpr int64_t kBlock = 1024;

// One operand of an instruction over one block: a run of floats, or one value repeated.
struct Operand {
  const float* p;
  bool scalar;
};

template <typename F>
inline void unary_block(float* __restrict d, Operand x, int64_t n, F f) {
  if (x.scalar) {
    const float v = f(x.p[0]);
    std::fill(d, d + n, v);
  } else {
    const float* __restrict s = x.p;
    for (int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
  }
}

template <typename F>
inline void binary_block(float* __restrict d, Operand a, Operand b, int64_t n, F f) {
  if (!a.scalar && !b.scalar) {
    const float* __restrict pa = a.p;
    const float* __restrict pb = b.p;
    for (int64_t i = 0; i < n; ++i) d[i] = f(pa[i], pb[i]);
  } else if (!a.scalar) {
    const float* __restrict pa = a.p;
    const float vb = b.p[0];
    for (int64_t i = 0; i < n; ++i) d[i] = f(pa[i], vb);
  } else if (!b.scalar) {
    const float va = a.p[0];
    const float* __restrict pb = b.p;
    for (int64_t i = 0; i < n; ++i) d[i] = f(va, pb[i]);
  } else {
    std::fill(d, d + n, f(a.p[0], b.p[0]));
  }
}

template <bool kRecip>
inline void sqrt_block(float* __restrict d, Operand x, int64_t n) {
  if (x.scalar) {
    float v;
    um::sqrt_array<kRecip>(x.p, &v, 1);
    std::fill(d, d + n, v);
  } else {
    um::sqrt_array<kRecip>(x.p, d, n);
  }
}

// The expressions of binary_kernels.cpp and unary_kernels.cpp, for f32.
void run_instruction(Code c, float* d, Operand a, Operand b, int64_t n) {
  switch (c) {
    case Code::add: return binary_block(d, a, b, n, [](float x, float y) { return x + y; });
    case Code::sub: return binary_block(d, a, b, n, [](float x, float y) { return x - y; });
    case Code::mul: return binary_block(d, a, b, n, [](float x, float y) { return x * y; });
    case Code::div: return binary_block(d, a, b, n, [](float x, float y) { return x / y; });
    case Code::maximum: return binary_block(d, a, b, n, [](float x, float y) { return x > y || x != x ? x : y; });
    case Code::minimum: return binary_block(d, a, b, n, [](float x, float y) { return x < y || x != x ? x : y; });
    case Code::squared_difference:
      return binary_block(d, a, b, n, [](float x, float y) { return (x - y) * (x - y); });
    case Code::pow:
      return binary_block(d, a, b, n, [](float x, float y) {
        return static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(y)));
      });
    case Code::neg: return unary_block(d, a, n, [](float x) { return -x; });
    case Code::abs: return unary_block(d, a, n, [](float x) { return std::fabs(x); });
    case Code::sign:
      return unary_block(d, a, n, [](float x) {
        float s = x > 0.0f ? 1.0f : 0.0f;
        s = x < 0.0f ? -1.0f : s;
        return x != x ? x : s;
      });
    case Code::square: return unary_block(d, a, n, [](float x) { return x * x; });
    case Code::relu: return unary_block(d, a, n, [](float x) { return x < 0.0f ? 0.0f : x; });
    case Code::exp: return unary_block(d, a, n, [](float x) { return um::exp_f32(x); });
    case Code::log: return unary_block(d, a, n, [](float x) { return um::log_f32(x); });
    case Code::sqrt: return sqrt_block<false>(d, a, n);
    case Code::rsqrt: return sqrt_block<true>(d, a, n);
    case Code::sigmoid: return unary_block(d, a, n, [](float x) { return um::sigmoid_f32(x); });
    case Code::tanh: return unary_block(d, a, n, [](float x) { return um::tanh_f32(x); });
    case Code::softplus: return unary_block(d, a, n, [](float x) { return um::softplus_f32(x); });
  }
}

// Rough ns per element, for parallel_for's sharding (unary_kernels.cpp's figures).
int64_t cost_of(Code c) {
  switch (c) {
    case Code::exp:
    case Code::log:
    case Code::sigmoid:
    case Code::tanh:
    case Code::softplus: return 3;
    case Code::pow: return 20;
    default: return 1;
  }
}

// A program ready to run: registers assigned, sharding cost, and the ops' own kernels
// for the op-by-op path.
class Compiled {
 public:
  explicit Compiled(const Node& n) : num_inputs_(n.inputs.size()) {
    if (const AttrValue* a = n.find_attr("ops"); a && a->is<AttrValue::Strings>()) ops_ = a->get<AttrValue::Strings>();
    if (const AttrValue* a = n.find_attr("args"); a && a->is<AttrValue::Ints>()) args_ = a->get<AttrValue::Ints>();
    auto program = fe::parse_program(n, static_cast<int>(n.inputs.size()));
    if (!program.ok()) {
      error_ = program.status();
      return;
    }
    program_ = std::move(*program);
    assign_registers();
    cost_ = 1 + program_.num_inputs;
    for (const fe::Instruction& in : program_.code) cost_ += cost_of(in.code);
    make_op_kernels(n);
  }

  // Whether `n` holds this program (same inputs, ops and operand slots), valid or not.
  bool runs(const Node& n) const {
    if (n.inputs.size() != num_inputs_) return false;
    const AttrValue* ops = n.find_attr("ops");
    const AttrValue* args = n.find_attr("args");
    const bool ops_match = ops && ops->is<AttrValue::Strings>() ? ops->get<AttrValue::Strings>() == ops_ : ops_.empty();
    const bool args_match = args && args->is<AttrValue::Ints>() ? args->get<AttrValue::Ints>() == args_ : args_.empty();
    return ops_match && args_match;
  }

  void compute(OpKernelContext& ctx) const {
    if (!error_.ok()) return ctx.fail(error_);
    const int ni = program_.num_inputs;
    if (ctx.num_inputs() != ni)
      return ctx.fail("expected " + std::to_string(ni) + " inputs, got " + std::to_string(ctx.num_inputs()));
    // The output's shape: the input with the most elements (then the highest rank).
    int widest = 0;
    for (int i = 0; i < ni; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != DType::f32)
        return ctx.fail("input " + std::to_string(i) + " is " + dtype_name(t.dtype()) + ", not float32");
      const Tensor& w = ctx.input(widest);
      if (t.num_elements() > w.num_elements() || (t.num_elements() == w.num_elements() && t.rank() > w.rank()))
        widest = i;
    }
    const Shape& shape = ctx.input(widest).shape();
    for (int i = 0; i < ni; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.shape() != shape && !(t.num_elements() == 1 && t.rank() <= shape.rank())) return run_op_by_op(ctx);
    }
    Tensor& out = ctx.allocate_output(0, DType::f32, shape);
    const int64_t n = out.num_elements();
    std::vector<Operand> inputs(static_cast<size_t>(ni));
    for (int i = 0; i < ni; ++i) inputs[static_cast<size_t>(i)] = {ctx.input(i).data<float>(), ctx.input(i).num_elements() == 1};
    float* y = out.data<float>();
    ctx.device()->parallel_for(n, cost_, [&](int64_t b, int64_t e) { run_range(inputs, y, b, e); });
  }

 private:
  // Registers for the results of all instructions but the last (which writes the
  // output), reused once a result's last reader has run. A result never shares a
  // register with its own operands, so every loop may take its pointers as __restrict.
  void assign_registers() {
    const size_t ni = static_cast<size_t>(program_.num_inputs);
    const size_t count = program_.code.size();
    std::vector<size_t> last_use(count, 0);
    for (size_t i = 0; i < count; ++i)
      for (int s : {program_.code[i].a, program_.code[i].b})
        if (s >= static_cast<int>(ni)) last_use[static_cast<size_t>(s) - ni] = i;
    register_of_.assign(count, -1);
    std::vector<int> free;
    for (size_t i = 0; i + 1 < count; ++i) {
      if (free.empty()) free.push_back(num_registers_++);
      register_of_[i] = free.back();
      free.pop_back();
      for (int s : {program_.code[i].a, program_.code[i].b}) {
        if (s < static_cast<int>(ni)) continue;
        const size_t j = static_cast<size_t>(s) - ni;
        const int r = register_of_[j];
        if (last_use[j] == i && std::find(free.begin(), free.end(), r) == free.end()) free.push_back(r);
      }
    }
  }

  void run_range(const std::vector<Operand>& inputs, float* y, int64_t begin, int64_t end) const {
    thread_local std::vector<float> scratch;
    const size_t need = static_cast<size_t>(num_registers_ * kBlock);
    if (scratch.size() < need) scratch.resize(need);
    float* regs = scratch.data();
    const int ni = program_.num_inputs;
    const size_t last = program_.code.size() - 1;
    for (int64_t start = begin; start < end; start += kBlock) {
      const int64_t len = std::min(kBlock, end - start);
      auto operand = [&](int slot) -> Operand {
        if (slot < 0) return {nullptr, true};
        if (slot < ni) {
          const Operand& in = inputs[static_cast<size_t>(slot)];
          return in.scalar ? in : Operand{in.p + start, false};
        }
        return {regs + register_of_[static_cast<size_t>(slot - ni)] * kBlock, false};
      };
      for (size_t i = 0; i <= last; ++i) {
        const fe::Instruction& in = program_.code[i];
        float* d = i == last ? y + start : regs + register_of_[i] * kBlock;
        run_instruction(in.code, d, operand(in.a), operand(in.b), len);
      }
    }
  }

  // The ops' own kernels, one per instruction, for the steps the one-pass path cannot take.
  void make_op_kernels(const Node& n) {
    op_nodes_.resize(program_.code.size());
    for (size_t i = 0; i < program_.code.size(); ++i) {
      Node& sub = op_nodes_[i];
      sub.id = n.id;
      sub.name = program_.names.empty() ? n.name : program_.names[i];
      sub.op = program_.ops[i];
      sub.device = n.device;
      sub.inputs.assign(program_.code[i].b < 0 ? 1 : 2, Endpoint{});
      sub.output_dtypes = {DType::f32};
      sub.output_shapes = {Shape::unknown_rank()};
      auto k = KernelRegistry::global().create(sub, DeviceType::CPU);
      if (!k.ok()) {
        error_ = k.status();
        return;
      }
      op_kernels_.push_back(std::move(*k));
    }
  }

  void run_op_by_op(OpKernelContext& ctx) const {
    std::vector<Tensor> values;
    values.reserve(static_cast<size_t>(program_.num_inputs) + program_.code.size());
    for (int i = 0; i < program_.num_inputs; ++i) values.push_back(ctx.input(i));
    for (size_t i = 0; i < program_.code.size(); ++i) {
      const fe::Instruction& in = program_.code[i];
      std::vector<Tensor> args{values[static_cast<size_t>(in.a)]};
      if (in.b >= 0) args.push_back(values[static_cast<size_t>(in.b)]);
      OpKernelContext sub(op_nodes_[i], std::move(args), ctx.device(), ctx.resources(), ctx.step_id());
      op_kernels_[i]->compute(sub);
      if (!sub.ok()) return ctx.fail(sub.status());
      values.push_back(std::move(sub.output(0)));
    }
    ctx.set_output(0, std::move(values.back()));
  }

  Status error_;
  fe::Program program_;
  size_t num_inputs_;       // the node's input count and attributes as given, to
  AttrValue::Strings ops_;  // recognize the program
  AttrValue::Ints args_;
  std::vector<int> register_of_;  // per instruction; -1 for the last
  int num_registers_ = 0;
  int64_t cost_ = 1;
  std::vector<Node> op_nodes_;
  std::vector<std::unique_ptr<OpKernel>> op_kernels_;
};

// The session's kernel cache keys kernels by node id and op (actors/src/executor.h), so
// one kernel object serves every plan in which this node is the root of a fused group,
// and plans that fetch different nodes fuse different groups under the same root. The
// program therefore comes from the node each step runs: the one the kernel was made for
// without a lock, others compiled once each and kept.
class FusedElementwiseKernel : public OpKernel {
 public:
  explicit FusedElementwiseKernel(const Node& n) : OpKernel(n), first_(std::make_shared<const Compiled>(n)) {}

  void compute(OpKernelContext& ctx) override {
    if (first_->runs(ctx.node())) return first_->compute(ctx);
    std::shared_ptr<const Compiled> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& o : others_)
        if (o->runs(ctx.node())) c = o;
      if (!c) {
        c = std::make_shared<const Compiled>(ctx.node());
        others_.push_back(c);
      }
    }
    c->compute(ctx);
  }

 private:
  std::shared_ptr<const Compiled> first_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const Compiled>> others_;
};

AF_REGISTER_KERNEL("_FusedElementwise", DeviceType::CPU, FusedElementwiseKernel);

}  // namespace
}  // namespace actorflow
