#include "actorflow/resource_mgr.h"

namespace actorflow {

std::shared_ptr<VariableState> ResourceMgr::variable(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = variables_[name];
  if (!v) v = std::make_shared<VariableState>();
  return v;
}

std::shared_ptr<VariableState> ResourceMgr::find_variable(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : it->second;
}

std::vector<std::string> ResourceMgr::variable_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (auto& [k, v] : variables_) names.push_back(k);
  return names;
}

std::shared_ptr<Resource> ResourceMgr::find_resource(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : it->second;
}

void ResourceMgr::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  variables_.clear();
  resources_.clear();
}

}  // namespace actorflow
