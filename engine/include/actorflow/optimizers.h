// Training: optimizers in the shape of TF 1.x's tf.train.*Optimizer, the global step,
// learning-rate decay and gradient clipping.
//
//   auto step = af::train::global_step(g);
//   af::optim::Adam opt(1e-3);
//   af::Operation train = opt.minimize(loss, {}, step);   // all trainable variables
//   AF_RETURN_IF_ERROR(sess.run_init());                   // variables, slots, global_step
//   for (...) AF_RETURN_IF_ERROR(sess.run({loss}, feeds, {train}).status());
//
// Each update is one Apply<Rule> node that changes the variable in place where it
// lives (SparseApply<Rule> for the gradient of a gather: only the rows touched). Slot
// variables are named "<var>/<Optimizer>", "<var>/<Optimizer>_1" (Adam's m and v, ...),
// are not trainable, and sit in the "variables" and "init_ops" collections, so
// run_init initializes them and a checkpoint of "variables" includes them. (Under a
// name scope the variable is not in, they get that scope's prefix too: scopes here are
// relative only.) Their initializers ignore the caller's control dependencies, as
// TF's init_scope, so minimize() may be called under ControlDependencies.
#pragma once
#include "actorflow/api.h"
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/gradients.h"
#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

namespace optim {

// A hyperparameter: a number, or a scalar tensor computed in the graph (a decayed
// learning rate, a placeholder). Cast to each variable's dtype where needed.
class Hyper {
 public:
  Hyper(double v) : value_(v) {}          // NOLINT: implicit by design
  Hyper(const Output& t) : tensor_(t) {}  // NOLINT
  bool is_tensor() const { return tensor_.valid(); }
  double value() const { return value_; }
  const Output& tensor() const { return tensor_; }

 private:
  double value_ = 0;
  Output tensor_;
};

// (gradient, variable) pairs, as TF's grads_and_vars; a gradient may be sparse.
using GradsAndVars = std::vector<std::pair<Gradient, Output>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // compute_gradients + apply_gradients. var_list empty: every trainable variable.
  // global_step valid: the returned op also adds 1 to it, after the updates.
  Operation minimize(const Output& loss, const std::vector<Output>& var_list = {}, const Output& global_step = {},
                     const std::string& name = "");
  // Gradients of loss for each variable (sparse where the variable is only gathered
  // from). A variable the loss does not depend on gets an invalid Gradient.
  GradsAndVars compute_gradients(const Output& loss, const std::vector<Output>& var_list = {});
  // One update op per variable with a valid gradient, grouped (name: the optimizer's
  // name). Throws af::Error if no variable has a gradient.
  Operation apply_gradients(const GradsAndVars& grads_and_vars, const Output& global_step = {},
                            const std::string& name = "");

  const std::string& name() const { return name_; }
  // The slot `slot` ("m", "accum", ...) of `var`; invalid before apply_gradients made it.
  Output get_slot(const Output& var, const std::string& slot) const;
  // The slot keys of this optimizer, in attribute order.
  std::vector<std::string> slot_names() const;

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  struct Slot {
    std::string key;  // the Apply op's attribute naming it ("m", "accum", ...)
    double init;      // initial value of every element
  };
  // What one update node looks like: its op ("ApplyAdam"), the hyperparameter inputs
  // before and after the gradient, extra attributes.
  struct ApplySpec {
    std::string op;
    std::vector<Output> before_grad, after_grad;
    std::map<std::string, AttrValue> attrs;
  };

  void add_slot(const std::string& key, double init) { slots_.push_back({key, init}); }
  void set_hyper(const std::string& key, Hyper h) { hypers_.insert_or_assign(key, std::move(h)); }
  // The hyperparameter as a scalar of `dtype` (one node per optimizer, key and dtype).
  Output hyper(Graph& g, const std::string& key, DType dtype);
  // Creates variables outside the user's control scopes (as TF's init_scope), once per
  // graph, named under the optimizer's view of the current name scope.
  Output make_variable(Graph& g, const std::string& name, double init, const Shape& shape, DType dtype);

  // The VariableV2 node `name` of g, or an invalid Output.
  static Output find_variable(Graph& g, const std::string& name);

  virtual ApplySpec apply_spec(Graph& g, const Output& var) = 0;
  // Hook before the updates are built (Adam creates its beta powers here).
  virtual void prepare(Graph& g, const std::vector<Output>& vars) { (void)g; (void)vars; }
  // Hook after: ops that must run once all updates did (Adam advances its beta powers).
  virtual std::vector<Operation> finish(Graph& g, const std::vector<Operation>& updates) {
    (void)g;
    return updates;
  }

 private:
  std::string name_;
  std::vector<Slot> slots_;
  std::map<std::string, Hyper> hypers_;
  std::map<std::pair<std::string, DType>, Output> hyper_nodes_;     // this apply_gradients call's
  std::map<std::string, std::map<std::string, std::string>> slot_vars_;  // var -> key -> slot name
};

// var -= lr * grad
class GradientDescent : public Optimizer {
 public:
  explicit GradientDescent(Hyper learning_rate, std::string name = "GradientDescent");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
};
using SGD = GradientDescent;

// accum = momentum * accum + grad; var -= lr * accum (Nesterov: var -= lr * (grad + momentum * accum)).
class Momentum : public Optimizer {
 public:
  Momentum(Hyper learning_rate, Hyper momentum, bool use_nesterov = false, std::string name = "Momentum");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;

 private:
  bool nesterov_;
};

// accum += grad^2; var -= lr * grad / sqrt(accum).
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(Hyper learning_rate, double initial_accumulator = 0.1, std::string name = "Adagrad");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
};

// Zeiler's ADADELTA with TF's learning-rate factor.
class Adadelta : public Optimizer {
 public:
  explicit Adadelta(Hyper learning_rate = 0.001, Hyper rho = 0.95, Hyper epsilon = 1e-8, std::string name = "Adadelta");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
};

// ms = decay * ms + (1 - decay) * grad^2 (ms starts at 1, as TF);
// mom = momentum * mom + lr * grad / sqrt(ms + eps); var -= mom.
class RMSProp : public Optimizer {
 public:
  explicit RMSProp(Hyper learning_rate, Hyper decay = 0.9, Hyper momentum = 0.0, Hyper epsilon = 1e-10,
                   std::string name = "RMSProp");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
};

// Kingma & Ba with TF's bias correction through "beta1_power"/"beta2_power" variables
// (one pair per optimizer and graph, advanced after every update). The sparse form
// updates m, v and var only at the rows given (TF's LazyAdam).
class Adam : public Optimizer {
 public:
  explicit Adam(Hyper learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999, Hyper epsilon = 1e-8,
                bool use_nesterov = false, std::string name = "Adam");
  // The beta power variables of the last apply_gradients (invalid before the first).
  std::pair<Output, Output> beta_powers() const { return {beta1_power_, beta2_power_}; }

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
  void prepare(Graph& g, const std::vector<Output>& vars) override;
  std::vector<Operation> finish(Graph& g, const std::vector<Operation>& updates) override;

 private:
  double beta1_, beta2_;
  bool nesterov_;
  Output beta1_power_, beta2_power_;
  std::string beta1_name_, beta2_name_;
};

// FTRL-Proximal (McMahan et al.), TF's FtrlOptimizer: accum starts at
// initial_accumulator, linear at 0.
class Ftrl : public Optimizer {
 public:
  explicit Ftrl(Hyper learning_rate, Hyper l1 = 0.0, Hyper l2 = 0.0, Hyper lr_power = -0.5,
                double initial_accumulator = 0.1, std::string name = "Ftrl");

 protected:
  ApplySpec apply_spec(Graph& g, const Output& var) override;
};

}  // namespace optim

namespace train {

// The graph's int64 scalar variable "global_step" (created on first use, starting at 0,
// not trainable). Pass it to minimize() to count steps.
Output global_step(Graph& g);

// lr * decay_rate ^ (global_step / decay_steps); staircase: the exponent is the integer
// quotient, so the rate drops every decay_steps steps. A float32 scalar (or the dtype of
// a tensor lr).
Output exponential_decay(optim::Hyper learning_rate, const Output& global_step, int64_t decay_steps, double decay_rate,
                         bool staircase = false, const std::string& name = "ExponentialDecay");

// Scales every gradient by clip_norm / max(global_norm, clip_norm), global_norm being
// sqrt(sum of squared elements of all gradients). Returns the clipped gradients (invalid
// ones stay invalid) and the global norm.
std::pair<std::vector<Output>, Output> clip_by_global_norm(const std::vector<Output>& grads, optim::Hyper clip_norm,
                                                           const std::string& name = "clip_by_global_norm");
// The same over (gradient, variable) pairs; a sparse gradient's values are clipped.
std::pair<optim::GradsAndVars, Output> clip_by_global_norm(const optim::GradsAndVars& grads_and_vars,
                                                           optim::Hyper clip_norm,
                                                           const std::string& name = "clip_by_global_norm");

}  // namespace train

}  // namespace actorflow

AF_PUBLIC_END
