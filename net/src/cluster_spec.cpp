// ClusterSpec and its names: task names, addresses, validation, the chief rule.
#include "actorflow/net/cluster_spec.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "parse_util.h"

namespace actorflow::net {

using detail::parse_int;
using detail::quote;

namespace {

constexpr std::array<std::string_view, 5> kJobs = {"chief", "master", "worker", "ps", "evaluator"};

// Printable ASCII without the characters that delimit lists, names and brackets.
bool host_text_ok(std::string_view h) {
  return !h.empty() && std::all_of(h.begin(), h.end(), [](char c) {
    return c > ' ' && c < 0x7f && c != '/' && c != '[' && c != ']' && c != ',' && c != '"';
  });
}

}  // namespace

bool is_known_job(std::string_view job) { return std::find(kJobs.begin(), kJobs.end(), job) != kJobs.end(); }

const char* known_jobs_text() { return "chief, master, worker, ps, evaluator"; }

// ---------------------------------------------------------------- TaskName

std::string TaskName::to_string() const { return "/job:" + job + "/task:" + std::to_string(index); }

Result<TaskName> TaskName::parse(std::string_view name) {
  const auto bad = [&] { return invalid_argument("task name " + quote(name) + " is not /job:NAME/task:N"); };
  std::string_view s = name;
  if (s.substr(0, 5) != "/job:") return bad();
  s.remove_prefix(5);
  size_t slash = s.find('/');
  if (slash == 0 || slash == std::string_view::npos) return bad();
  TaskName t;
  t.job = std::string(s.substr(0, slash));
  s.remove_prefix(slash);
  if (s.substr(0, 11) == "/replica:0/") s.remove_prefix(10);
  if (s.substr(0, 6) != "/task:") return bad();
  auto index = parse_int(s.substr(6), 0, 1 << 30);
  if (!index) return bad();
  t.index = static_cast<int>(*index);
  return t;
}

// ---------------------------------------------------------------- HostPort

std::string HostPort::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HostPort> HostPort::parse(std::string_view text, uint16_t default_port) {
  HostPort hp;
  hp.port = default_port;
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return invalid_argument(quote(text) + " has a '[' without a ']'");
    hp.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return invalid_argument(quote(text) + " has text after ']' that is not :PORT");
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos)
      return invalid_argument(quote(text) + " looks like an IPv6 address: write it as [ADDRESS]:PORT");
    hp.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = text.substr(colon + 1);
      has_port = true;
    }
  }
  if (!host_text_ok(hp.host)) return invalid_argument(quote(text) + " has no valid host name");
  if (has_port) {
    auto port = parse_int(port_text, 0, 65535);
    if (!port) return invalid_argument(quote(text) + " has port " + quote(port_text) + ", not a number from 0 to 65535");
    hp.port = static_cast<uint16_t>(*port);
  }
  return hp;
}

// ---------------------------------------------------------------- ClusterSpec

Result<ClusterSpec> ClusterSpec::make(Jobs jobs, TaskName self, const SpecOrigin& origin) {
  const std::string where = origin.source + ": ";
  std::erase_if(jobs, [](const auto& job) { return job.second.empty(); });
  std::map<std::pair<std::string, uint16_t>, TaskName> owner;
  for (const auto& [job, hosts] : jobs) {
    if (!is_known_job(job))
      return invalid_argument(where + "job " + quote(job) + " is not one of " + known_jobs_text());
    for (size_t i = 0; i < hosts.size(); ++i) {
      TaskName t{job, static_cast<int>(i)};
      auto [it, fresh] = owner.emplace(std::pair{hosts[i].host, hosts[i].port}, t);
      if (!fresh)
        return invalid_argument(where + it->second.to_string() + " and " + t.to_string() + " share the address " +
                                hosts[i].to_string());
    }
  }
  if (jobs.empty()) return invalid_argument(where + "the cluster has no tasks");
  if (self.job.empty()) return invalid_argument(where + origin.job_field + " is missing: which job is this task?");
  if (!is_known_job(self.job))
    return invalid_argument(where + origin.job_field + " " + quote(self.job) + " is not one of " + known_jobs_text());
  if (self.index < 0)
    return invalid_argument(where + origin.index_field + " " + std::to_string(self.index) + " is negative");
  auto job = jobs.find(self.job);
  if (job == jobs.end()) {
    if (self.job != "evaluator") {
      std::string have;
      for (const auto& [name, hosts] : jobs) have += (have.empty() ? "" : ", ") + name;
      return invalid_argument(where + origin.job_field + " " + quote(self.job) + " is not a job of the cluster (it has " +
                              have + ")");
    }
  } else if (static_cast<size_t>(self.index) >= job->second.size()) {
    return invalid_argument(where + origin.index_field + " " + std::to_string(self.index) + " is out of range for job " +
                            quote(self.job) + " (" + std::to_string(job->second.size()) + " tasks)");
  }
  ClusterSpec spec;
  spec.jobs_ = std::move(jobs);
  spec.self_ = std::move(self);
  return spec;
}

int ClusterSpec::num_tasks(std::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<TaskName> ClusterSpec::tasks() const {
  std::vector<TaskName> out;
  for (const auto& [job, hosts] : jobs_)
    for (size_t i = 0; i < hosts.size(); ++i) out.push_back({job, static_cast<int>(i)});
  return out;
}

Result<HostPort> ClusterSpec::address(const TaskName& task) const {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end() || task.index < 0 || static_cast<size_t>(task.index) >= it->second.size())
    return not_found("the cluster has no task " + task.to_string() + " (it has " + std::to_string(num_tasks(task.job)) +
                     " in job " + quote(task.job) + ")");
  return it->second[static_cast<size_t>(task.index)];
}

Result<TaskName> ClusterSpec::chief() const {
  for (const char* job : {"chief", "master", "worker"})
    if (num_tasks(job) > 0) return TaskName{job, 0};
  return failed_precondition("the cluster has no chief: it holds no chief, master or worker task");
}

bool ClusterSpec::is_chief() const {
  auto c = chief();
  return c.ok() && *c == self_;
}

std::string ClusterSpec::to_tf_config() const {
  nlohmann::json cluster = nlohmann::json::object();
  for (const auto& [job, hosts] : jobs_) {
    nlohmann::json list = nlohmann::json::array();
    for (const HostPort& hp : hosts) list.push_back(hp.to_string());
    cluster[job] = std::move(list);
  }
  nlohmann::json doc = {{"cluster", std::move(cluster)}, {"task", {{"type", self_.job}, {"index", self_.index}}}};
  return doc.dump();  // host names are printable ASCII (HostPort::parse), so this cannot throw
}

}  // namespace actorflow::net
