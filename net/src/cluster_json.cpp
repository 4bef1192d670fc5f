// Cluster specs written as JSON: TF's {"ps": [...], "worker": [...]}, and the TF_CONFIG
// form {"cluster": {...}, "task": {"type": ..., "index": ...}} that Kubeflow's TFJob sets.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actorflow/net/cluster_sources.h"
#include "parse_util.h"

namespace actorflow::net {
namespace {

using nlohmann::json;
using detail::quote;

// A value as the user wrote it, for messages.
std::string shown(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

Result<ClusterSpec::Jobs> parse_jobs(const json& cluster, const std::string& where, const std::string& prefix) {
  if (!cluster.is_object()) return invalid_argument(where + prefix + "is " + shown(cluster) + ", not an object of jobs");
  ClusterSpec::Jobs jobs;
  for (const auto& [job, hosts] : cluster.items()) {
    const std::string field = prefix + job;
    if (!is_known_job(job)) return invalid_argument(where + field + ": " + quote(job) + " is not one of " + known_jobs_text());
    if (!hosts.is_array()) return invalid_argument(where + field + " is " + shown(hosts) + ", not a list of addresses");
    std::vector<HostPort>& list = jobs[job];
    for (size_t i = 0; i < hosts.size(); ++i) {
      const std::string item = field + "[" + std::to_string(i) + "]";
      if (!hosts[i].is_string()) return invalid_argument(where + item + " is " + shown(hosts[i]) + ", not \"host:port\"");
      auto hp = HostPort::parse(hosts[i].get<std::string>());
      if (!hp.ok()) return invalid_argument(where + item + " " + hp.status().message());
      list.push_back(*hp);
    }
  }
  return jobs;
}

// TF reads "index" with int(), so a string of digits passes there too.
Result<int> parse_index(const json& v, const std::string& where) {
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < 0) return invalid_argument(where + "task.index " + std::to_string(i) + " is negative");
    if (i < (1 << 30)) return static_cast<int>(i);
  } else if (v.is_string()) {
    if (auto i = detail::parse_int(v.get<std::string>(), 0, 1 << 30)) return static_cast<int>(*i);
  }
  return invalid_argument(where + "task.index " + shown(v) + " is not a task number");
}

Result<TaskName> parse_task(const json& task, const std::string& where) {
  if (!task.is_object()) return invalid_argument(where + "task is " + shown(task) + ", not {\"type\": ..., \"index\": ...}");
  auto type = task.find("type");
  if (type == task.end()) return invalid_argument(where + "task.type is missing");
  if (!type->is_string()) return invalid_argument(where + "task.type " + shown(*type) + " is not a job name");
  TaskName t{type->get<std::string>(), 0};
  if (auto index = task.find("index"); index != task.end()) {
    AF_ASSIGN_OR_RETURN(t.index, parse_index(*index, where));
  }
  return t;
}

}  // namespace

Result<ClusterSpec> parse_cluster_json(std::string_view text, const std::string& source, const std::optional<TaskName>& task) {
  const std::string where = source + ": ";
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    std::string m = e.what();
    if (size_t close = m.find("] "); !m.empty() && m[0] == '[' && close != std::string::npos) m.erase(0, close + 2);
    return invalid_argument(where + "not valid JSON (" + m + ")");
  }
  if (!doc.is_object()) return invalid_argument(where + "is " + shown(doc) + ", not a JSON object");
  const bool tf_config_form = doc.contains("cluster") || doc.contains("task");
  ClusterSpec::Jobs jobs;
  std::optional<TaskName> self = task;
  if (tf_config_form) {
    auto cluster = doc.find("cluster");
    if (cluster == doc.end()) return invalid_argument(where + "cluster is missing");
    AF_ASSIGN_OR_RETURN(jobs, parse_jobs(*cluster, where, "cluster."));
    if (auto t = doc.find("task"); t != doc.end() && !self) {
      AF_ASSIGN_OR_RETURN(self, parse_task(*t, where));
    }
  } else {
    AF_ASSIGN_OR_RETURN(jobs, parse_jobs(doc, where, ""));
  }
  if (!self)
    return invalid_argument(where + "task is missing: give --job_name and --task_index, or a \"task\" object");
  // A task given by flags is reported by those flags' names.
  const SpecOrigin origin = task ? SpecOrigin{source, "--job_name", "--task_index"} : SpecOrigin{source};
  return ClusterSpec::make(std::move(jobs), std::move(*self), origin);
}

Result<ClusterSpec> read_cluster_spec_file(const std::string& path, const std::optional<TaskName>& task) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cluster spec file " + quote(path) + " cannot be opened");
  std::ostringstream bytes;
  bytes << f.rdbuf();
  if (f.bad()) return invalid_argument("cluster spec file " + quote(path) + " cannot be read");
  return parse_cluster_json(bytes.str(), "cluster spec file " + quote(path), task);
}

Result<ClusterSpec> parse_tf_config(std::string_view value) {
  if (value.find_first_not_of(" \t\r\n") == std::string_view::npos) return invalid_argument("TF_CONFIG is set but empty");
  return parse_cluster_json(value, "TF_CONFIG");
}

}  // namespace actorflow::net
