#include "model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tensorflow_serving/config/model_server_config.pb.h"

namespace serve {

namespace af = actorflow;
namespace tfs = tensorflow::serving;

bool valid_model_name(const std::string& name) {
  return !name.empty() && name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == std::string::npos;
}

namespace {

// Collects the text-format parser's first error with its place.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " + message;
  }
  std::string error;
};

}  // namespace

af::Result<std::vector<ManagerOptions>> parse_model_config(const std::string& text, const std::string& path,
                                                           const ManagerOptions& defaults) {
  tfs::ModelServerConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config))
    return af::invalid_argument("model config file " + path + ": " + (errors.error.empty() ? "not a ModelServerConfig" : errors.error));
  if (!config.has_model_config_list() || config.model_config_list().config_size() == 0)
    return af::invalid_argument("model config file " + path + " lists no model (model_config_list { config { ... } })");
  std::vector<ManagerOptions> out;
  std::set<std::string> names;
  for (int i = 0; i < config.model_config_list().config_size(); ++i) {
    const tfs::ModelConfig& c = config.model_config_list().config(i);
    const std::string which = "model config file " + path + ", config " + std::to_string(i + 1) + (c.name().empty() ? "" : " ('" + c.name() + "')");
    if (c.name().empty()) return af::invalid_argument(which + ": name is missing");
    if (!valid_model_name(c.name())) return af::invalid_argument(which + ": a name may hold letters, digits, '_', '.' and '-' only");
    if (!names.insert(c.name()).second) return af::invalid_argument(which + ": another config has this name");
    if (c.base_path().empty()) return af::invalid_argument(which + ": base_path is missing");
    if (!c.model_platform().empty() && c.model_platform() != "tensorflow")
      return af::invalid_argument(which + ": model_platform '" + c.model_platform() + "' is not served here (only \"tensorflow\")");
    ManagerOptions o = defaults;
    o.model_name = c.name();
    o.base_path = c.base_path();
    o.policy = VersionPolicy{};
    o.labels.clear();
    const auto& p = c.model_version_policy();
    switch (p.policy_choice_case()) {
      case tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kLatest:
        o.policy.kind = VersionPolicy::Kind::latest;
        o.policy.latest = p.latest().num_versions() > 0 ? p.latest().num_versions() : 1;  // TF Serving's default
        break;
      case tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kAll:
        o.policy.kind = VersionPolicy::Kind::all;
        break;
      case tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kSpecific:
        o.policy.kind = VersionPolicy::Kind::specific;
        if (p.specific().versions_size() == 0) return af::invalid_argument(which + ": model_version_policy specific lists no version");
        for (int64_t v : p.specific().versions()) {
          if (v < 1) return af::invalid_argument(which + ": model_version_policy specific lists version " + std::to_string(v) + " (versions are 1 or more)");
          o.policy.versions.push_back(v);
        }
        break;
      default: break;  // none: the newest version
    }
    for (auto& [label, version] : c.version_labels()) {
      if (label.empty() || !valid_model_name(label))
        return af::invalid_argument(which + ": version label '" + label + "' may hold letters, digits, '_', '.' and '-' only");
      if (version < 1) return af::invalid_argument(which + ": version label '" + label + "' names version " + std::to_string(version));
      o.labels[label] = version;
    }
    out.push_back(std::move(o));
  }
  return out;
}

af::Result<std::vector<ManagerOptions>> read_model_config_file(const std::string& path, const ManagerOptions& defaults) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return af::not_found("cannot read the model config file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), path, defaults);
}

}  // namespace serve
