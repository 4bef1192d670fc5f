// State that outlives a step: variables, owned by the session (or the parameter server
// that hosts them), looked up by the kernels of the nodes that read and update them.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actorflow/tensor.h"

namespace actorflow {

struct VariableState {
  std::mutex mu;
  Tensor value;  // invalid until initialized
  DType dtype = DType::invalid;
  Shape shape;
};

class ResourceMgr {
 public:
  // Finds or creates the variable named `name`.
  std::shared_ptr<VariableState> variable(const std::string& name);
  std::shared_ptr<VariableState> find_variable(const std::string& name) const;
  std::vector<std::string> variable_names() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<VariableState>> variables_;
};

}  // namespace actorflow
