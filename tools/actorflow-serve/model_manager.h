// The versions of one served model: the newest loadable version under
// <model_base_path>/<N>/ is the one answering; a poller loads a newer one beside it and
// swaps. Requests hold a shared_ptr to the version they started on, so a swap never drops
// one; the old version unloads when its last request lets go (TF Serving's "availability
// preserving" policy for one version).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <actorflow/actorflow.h>

#include "serving.h"

namespace serve {

// One loaded version: the kit's exported-model loader (kit::ServedModel, shared with
// `--mode inference`) plus what the REST API tells clients about its signature.
struct LoadedModel {
  int64_t version = 0;
  // mutable: predict is a session run, which may be called from many threads at once.
  mutable kit::ServedModel model;
  std::string input_name, output_name;
  actorflow::DType input_dtype = actorflow::DType::f32, output_dtype = actorflow::DType::f32;
  actorflow::Shape input_shape, output_shape;
};

// TF Serving's ModelVersionStatus: state is LOADING, AVAILABLE, UNLOADING or END; a
// version that failed to load is END with its error.
struct VersionStatus {
  int64_t version = 0;
  std::string state;
  std::string error_code = "OK";
  std::string error_message;
};

struct ManagerOptions {
  std::string model_name;
  std::string base_path;
  double poll_seconds = 1.0;  // 0: look once, at start
  actorflow::SessionOptions session;
};

class ModelManager {
 public:
  using Log = std::function<void(const std::string&)>;
  ModelManager(ManagerOptions options, Log log);
  ~ModelManager();  // stops the poller
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Scans the base path once and loads the newest ready version if it is not the one
  // served. A version is ready once its signature.txt exists (export writes it last).
  void poll_once();
  // Polls every poll_seconds on a thread of its own, until the destructor or stop().
  void start_polling();
  void stop();

  // The version answering now, or null while none is loaded.
  std::shared_ptr<const LoadedModel> current() const;
  std::vector<VersionStatus> statuses() const;
  const std::string& name() const { return options_.model_name; }

 private:
  struct Table;  // the statuses; shared with the deleters of loaded versions
  // The numbered subfolders of the base path that are ready, with a fingerprint of their
  // files (a version that failed is tried again only once its files change).
  std::map<int64_t, std::string> ready_versions() const;
  void load(int64_t version, const std::string& fingerprint);

  ManagerOptions options_;
  Log log_;
  std::shared_ptr<Table> table_;
  mutable std::mutex mu_;  // guards current_ and failed_
  std::shared_ptr<const LoadedModel> current_;
  std::map<int64_t, std::string> failed_;  // version -> fingerprint that failed
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace serve
