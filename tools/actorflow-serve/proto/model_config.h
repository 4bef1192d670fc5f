// --model_config_file: TF Serving's ModelServerConfig in protobuf's text format,
//
//   model_config_list {
//     config { name: "cancer" base_path: "/models/cancer" model_platform: "tensorflow"
//              model_version_policy { latest { num_versions: 2 } }
//              version_labels { key: "stable" value: 1 } }
//     config { name: "fashion" base_path: "/models/fashion"
//              model_version_policy { specific { versions: 1 versions: 3 } } }
//   }
//
// read into one ManagerOptions per model.
#pragma once
#include <string>
#include <vector>

#include <actorflow/actorflow.h>

#include "model_manager.h"

namespace serve {

// Parses `text` (the file's contents; `path` names it in errors). Every model gets
// `defaults`' poll period and session options. Errors (invalid_argument) name the file and
// the model: a text-format error with its line and column, a missing or repeated name, a
// name with characters other than letters, digits, '_', '.' and '-', a missing
// base_path, a platform other than "tensorflow", an empty `specific` list, a label on a
// version number below 1.
actorflow::Result<std::vector<ManagerOptions>> parse_model_config(const std::string& text, const std::string& path,
                                                                  const ManagerOptions& defaults);

// Reads and parses the file; not_found when it cannot be read.
actorflow::Result<std::vector<ManagerOptions>> read_model_config_file(const std::string& path, const ManagerOptions& defaults);

// Letters, digits, '_', '.' and '-': what goes into URLs and metric labels unchanged.
bool valid_model_name(const std::string& name);

}  // namespace serve
