// State that outlives a step: variables, owned by the session (or the parameter server
// that hosts them), looked up by the kernels of the nodes that read and update them.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct VariableState {
  std::mutex mu;
  Tensor value;  // invalid until initialized
  DType dtype = DType::invalid;
  Shape shape;
};

// Any other state kept beside the variables (the accumulators and clocks of
// distributed training): kernels find it by name and type through ResourceMgr::get.
class Resource {
 public:
  virtual ~Resource() = default;
};

class ResourceMgr {
 public:
  // Finds the resource named `name`, or makes it with `make` when there is none. Null
  // when the name holds a resource of another type.
  template <typename T>
  std::shared_ptr<T> get(const std::string& name, const std::function<std::shared_ptr<T>()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = resources_[name];
    if (!slot) slot = make();
    return std::dynamic_pointer_cast<T>(slot);
  }
  std::shared_ptr<Resource> find_resource(const std::string& name) const;

  // Finds or creates the variable named `name`.
  std::shared_ptr<VariableState> variable(const std::string& name);
  std::shared_ptr<VariableState> find_variable(const std::string& name) const;
  std::vector<std::string> variable_names() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<VariableState>> variables_;
  std::map<std::string, std::shared_ptr<Resource>> resources_;
};

}  // namespace actorflow

AF_PUBLIC_END
