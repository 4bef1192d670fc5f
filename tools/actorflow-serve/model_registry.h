// The models one server serves, by name: one from --model_name/--model_base_path, or
// several from --model_config_file. Both APIs (REST and gRPC) find models here.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "echo.h"
#include "model_manager.h"

namespace serve {

class ModelRegistry {
 public:
  // Takes the managers; names must differ (the config reader checks).
  explicit ModelRegistry(std::vector<std::unique_ptr<ModelManager>> models) : models_(std::move(models)) {}

  // Null when no model has this name.
  ModelManager* find(const std::string& name) const {
    for (auto& m : models_)
      if (m->name() == name) return m.get();
    return nullptr;
  }
  // A model's version as a request names it: not_found for an unknown model (TF
  // Serving's "Servable not found"), else ModelManager::find's answer.
  actorflow::Result<std::shared_ptr<const LoadedModel>> find(const std::string& name, int64_t version, const std::string& label) const {
    auto* m = find(name);
    if (!m) return actorflow::not_found("Servable not found for request: no model named '" + echo(name) + "'");
    return m->find(version, label);
  }
  const std::vector<std::unique_ptr<ModelManager>>& all() const { return models_; }

  void poll_once() {
    for (auto& m : models_) m->poll_once();
  }
  void start_polling() {
    for (auto& m : models_) m->start_polling();
  }
  void stop() {
    for (auto& m : models_) m->stop();
  }

 private:
  std::vector<std::unique_ptr<ModelManager>> models_;
};

}  // namespace serve
