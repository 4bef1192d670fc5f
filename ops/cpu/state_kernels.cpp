// CPU kernels of sources, variables and plumbing.
#include <cstring>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "common/variable_write.h"

namespace actorflow {
namespace {

class ConstKernel : public OpKernel {
 public:
  explicit ConstKernel(const Node& n) : OpKernel(n), value_(*n.attr_tensor("value")) {}
  void compute(OpKernelContext& ctx) override { ctx.set_output(0, value_); }

 private:
  Tensor value_;
};

class PlaceholderKernel : public OpKernel {
 public:
  explicit PlaceholderKernel(const Node& n)
      : OpKernel(n), what_(std::string(dtype_name(n.attr_dtype("dtype"))) + n.attr_shape("shape").to_string()) {}
  void compute(OpKernelContext& ctx) override {
    ctx.fail(invalid_argument("you must feed a value for placeholder '" + name() + "' (" + what_ + ")"));
  }

 private:
  std::string what_;
};

class ForwardKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override { ctx.set_output(0, ctx.take_input(0)); }
};

class NoOpKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext&) override {}
};

// VariableV2 reads its own state; ReadVariable reads the variable named by its attribute,
// at the moment it fires (after its control dependencies).
class VariableKernel : public OpKernel {
 public:
  explicit VariableKernel(const Node& n) : OpKernel(n), variable_(n.op == "VariableV2" ? n.name : n.attr_string("variable")) {}
  void compute(OpKernelContext& ctx) override {
    const std::string& name = variable_;
    auto var = ctx.resources()->variable(name);
    std::lock_guard<std::mutex> lock(var->mu);
    if (!var->value.valid()) {
      ctx.fail(failed_precondition("variable '" + name + "' is used before it was initialized (run Session::run_init())"));
      return;
    }
    ctx.set_output(0, var->value);
  }

 private:
  std::string variable_;
};

class IsVariableInitializedKernel : public OpKernel {
 public:
  explicit IsVariableInitializedKernel(const Node& n) : OpKernel(n), variable_(n.attr_string("variable")) {}
  void compute(OpKernelContext& ctx) override {
    auto var = ctx.resources()->variable(variable_);
    bool initialized;
    {
      std::lock_guard<std::mutex> lock(var->mu);
      initialized = var->value.valid();
    }
    ctx.set_output(0, Tensor::scalar(initialized));
  }

 private:
  std::string variable_;
};

class ReportUninitializedKernel : public OpKernel {
 public:
  explicit ReportUninitializedKernel(const Node& n) : OpKernel(n), names_(n.find_attr("names")->get<AttrValue::Strings>()) {}
  void compute(OpKernelContext& ctx) override {
    std::vector<std::string> missing;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& flag = ctx.input(i);
      if (flag.dtype() != DType::boolean || flag.num_elements() != 1)
        return ctx.fail(invalid_argument("input " + std::to_string(i) + " ('" + names_[static_cast<size_t>(i)] +
                                         "') must be one bool, got " + dtype_name(flag.dtype()) +
                                         flag.shape().to_string()));
      if (!flag.data<bool>()[0]) missing.push_back(names_[static_cast<size_t>(i)]);
    }
    const auto n = static_cast<int64_t>(missing.size());
    ctx.set_output(0, Tensor::from_vector(std::move(missing), Shape{n}));
  }

 private:
  std::vector<std::string> names_;
};

// Assign stores the value; AssignAdd/Sub update in place when no reader holds the
// current buffer and copy first otherwise, so every read is a consistent snapshot.
class UpdateKernel : public OpKernel {
 public:
  enum class Mode { assign, add, sub };
  UpdateKernel(const Node& n, Mode mode)
      : OpKernel(n), variable_(n.attr_string("variable")), declared_(n.output_shapes[0]), mode_(mode) {}
  void compute(OpKernelContext& ctx) override {
    auto var = ctx.resources()->variable(variable_);
    Tensor value = ctx.take_input(0);
    std::lock_guard<std::mutex> lock(var->mu);
    // The GPU's Assign runs this code too, on its device's tensors; a variable's users all
    // run where its value lives, else this would touch device memory from the host.
    const DeviceType here = ctx.device() ? ctx.device()->id().type : DeviceType::CPU;
    if (var->value.valid() && var->value.device().type != here) {
      ctx.fail(failed_precondition("node '" + ctx.node().name + "' (" + ctx.node().op + ") runs on the " +
                                   (here == DeviceType::CPU ? "CPU" : "GPU") + " but variable '" + variable_ +
                                   "' lives on " + var->value.device().to_string()));
      return;
    }
    if (mode_ == Mode::assign) {
      if (!declared_.compatible_with(value.shape())) {
        ctx.fail(invalid_argument("value of shape " + value.shape().to_string() + " does not fit variable '" + variable_ +
                                  "' of shape " + declared_.to_string()));
        return;
      }
      // A variable owns its buffer from the start: a value still held elsewhere (a
      // constant's, another variable's) is copied, so an update that writes its rows in
      // place (a sparse apply) can never reach a constant or another variable.
      var->value = value.buffer_use_count() > 1 ? value.clone() : std::move(value);
      if (var->value.buffer()) var->value.buffer()->mark_variable();
      ctx.set_output(0, var->value);
      return;
    }
    if (!var->value.valid()) {
      ctx.fail(failed_precondition("variable '" + variable_ + "' is updated before it was initialized"));
      return;
    }
    if (value.dtype() != var->value.dtype() ||
        (value.shape() != var->value.shape() && value.num_elements() != 1)) {
      ctx.fail(invalid_argument("update value " + std::string(dtype_name(value.dtype())) + value.shape().to_string() +
                                " does not match variable '" + variable_ + "' " + dtype_name(var->value.dtype()) +
                                var->value.shape().to_string()));
      return;
    }
    own_variable_value(*var);
    Tensor& v = var->value;
    bool ok = visit_dtype(v.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) return;
      else {
        T* p = v.data<T>();
        const T* q = value.data<T>();
        int64_t n = v.num_elements();
        bool scalar = value.num_elements() == 1 && n != 1;
        if (mode_ == Mode::add) {
          for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] + q[scalar ? 0 : i]);
        } else {
          for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] - q[scalar ? 0 : i]);
        }
      }
    });
    if (v.buffer()) v.buffer()->note_write();
    if (!ok || v.dtype() == DType::boolean) {
      ctx.fail(invalid_argument(std::string("cannot add to a variable of dtype ") + dtype_name(v.dtype())));
      return;
    }
    ctx.set_output(0, v);
  }

 private:
  std::string variable_;
  Shape declared_;
  Mode mode_;
};

AF_REGISTER_KERNEL("Const", DeviceType::CPU, ConstKernel);
AF_REGISTER_KERNEL("Placeholder", DeviceType::CPU, PlaceholderKernel);
AF_REGISTER_KERNEL("PlaceholderWithDefault", DeviceType::CPU, ForwardKernel);
AF_REGISTER_KERNEL("Identity", DeviceType::CPU, ForwardKernel);
AF_REGISTER_KERNEL("StopGradient", DeviceType::CPU, ForwardKernel);
AF_REGISTER_KERNEL("NoOp", DeviceType::CPU, NoOpKernel);
AF_REGISTER_KERNEL("VariableV2", DeviceType::CPU, VariableKernel);
AF_REGISTER_KERNEL("ReadVariable", DeviceType::CPU, VariableKernel);
AF_REGISTER_KERNEL("IsVariableInitialized", DeviceType::CPU, IsVariableInitializedKernel);
AF_REGISTER_KERNEL("ReportUninitialized", DeviceType::CPU, ReportUninitializedKernel);

struct AssignKernel : UpdateKernel { explicit AssignKernel(const Node& n) : UpdateKernel(n, Mode::assign) {} };
struct AssignAddKernel : UpdateKernel { explicit AssignAddKernel(const Node& n) : UpdateKernel(n, Mode::add) {} };
struct AssignSubKernel : UpdateKernel { explicit AssignSubKernel(const Node& n) : UpdateKernel(n, Mode::sub) {} };
AF_REGISTER_KERNEL("Assign", DeviceType::CPU, AssignKernel);
AF_REGISTER_KERNEL("AssignAdd", DeviceType::CPU, AssignAddKernel);
AF_REGISTER_KERNEL("AssignSub", DeviceType::CPU, AssignSubKernel);

}  // namespace
}  // namespace actorflow
