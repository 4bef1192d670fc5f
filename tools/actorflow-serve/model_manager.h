// The versions of one served model under <model_base_path>/<N>/. A version policy (TF
// Serving's ServableVersionPolicy) says which versions on disk are served: the newest N
// (default 1), every one, or a listed few. A poller loads the versions the policy wants
// and only then unloads those it no longer wants (TF Serving's "availability preserving"
// transition). Requests hold a shared_ptr to the version they started on, so a swap never
// drops one; a version unloads when its last request lets go.
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

namespace serve {

// One loaded version: the library's exported-model loader (actorflow::ServedModel, shared
// with the samples' `--mode inference`) plus what the APIs tell clients about its signature.
struct LoadedModel {
  std::string model_name;
  int64_t version = 0;
  std::string dir;  // <base_path>/<version>
  // mutable: predict is a session run, which may be called from many threads at once.
  mutable actorflow::ServedModel model;
  std::string input_name, output_name;
  actorflow::DType input_dtype = actorflow::DType::f32, output_dtype = actorflow::DType::f32;
  actorflow::Shape input_shape, output_shape;
};

// TF Serving's ModelVersionStatus: state is LOADING, AVAILABLE, UNLOADING or END; a
// version that failed to load is END with its error.
struct VersionStatus {
  int64_t version = 0;
  std::string state;
  std::string error_code = "OK";  // actorflow::code_name(code)
  actorflow::Code code = actorflow::Code::ok;
  std::string error_message;
};

// TF Serving's ServableVersionPolicy.
struct VersionPolicy {
  enum class Kind { latest, all, specific };
  Kind kind = Kind::latest;
  int64_t latest = 1;              // with Kind::latest
  std::vector<int64_t> versions;   // with Kind::specific
  std::string to_string() const;
};

struct ManagerOptions {
  std::string model_name;
  std::string base_path;
  double poll_seconds = 1.0;  // 0: look once, at start
  VersionPolicy policy;
  // Version labels ("stable" -> 1), as the model config file gives them.
  std::map<std::string, int64_t> labels;
  actorflow::SessionOptions session;
  // Runs on a freshly loaded version before it is made available (warm-up); an error
  // fails the load.
  std::function<actorflow::Status(const LoadedModel&)> before_available;
};

class ModelManager {
 public:
  using Log = std::function<void(const std::string&)>;
  ModelManager(ManagerOptions options, Log log);
  ~ModelManager();  // stops the poller
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Scans the base path once, loads the versions the policy wants that are not loaded,
  // then unloads the ones it no longer wants. A version is ready once its signature.txt
  // exists (export writes it last).
  void poll_once();
  // Polls every poll_seconds on a thread of its own, until the destructor or stop().
  void start_polling();
  void stop();

  // The newest version loaded, or null while none is.
  std::shared_ptr<const LoadedModel> current() const;
  // The version a request names: `version` (0: not named) or `label` (empty: not named);
  // neither: the newest. Errors: unavailable while nothing is loaded, not_found for a
  // version not served, invalid_argument for an unknown label; each names the model.
  actorflow::Result<std::shared_ptr<const LoadedModel>> find(int64_t version, const std::string& label = "") const;
  std::vector<int64_t> loaded_versions() const;  // oldest first
  std::vector<VersionStatus> statuses() const;   // newest first
  const std::string& name() const { return options_.model_name; }
  const ManagerOptions& options() const { return options_; }

 private:
  struct Table;  // the statuses; shared with the deleters of loaded versions
  // The numbered subfolders of the base path that are ready, with a fingerprint of their
  // files (a version that failed is tried again only once its files change).
  std::map<int64_t, std::string> ready_versions() const;
  // Loads one version and adds it to loaded_; false when it failed.
  bool load(int64_t version, const std::string& fingerprint);
  void unload(int64_t version);

  ManagerOptions options_;
  Log log_;
  std::shared_ptr<Table> table_;
  mutable std::mutex mu_;  // guards loaded_ and failed_
  std::map<int64_t, std::shared_ptr<const LoadedModel>> loaded_;
  std::map<int64_t, std::string> failed_;  // version -> fingerprint that failed
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace serve
