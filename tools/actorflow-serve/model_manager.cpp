#include "model_manager.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "echo.h"

namespace serve {

namespace af = actorflow;
namespace fs = std::filesystem;

std::string VersionPolicy::to_string() const {
  switch (kind) {
    case Kind::latest: return "latest " + std::to_string(latest);
    case Kind::all: return "all";
    case Kind::specific: {
      std::string s = "specific {";
      for (size_t i = 0; i < versions.size(); ++i) s += (i ? ", " : " ") + std::to_string(versions[i]);
      return s + " }";
    }
  }
  return "?";
}

struct ModelManager::Table {
  std::mutex mu;
  std::map<int64_t, VersionStatus> versions;

  void set(int64_t v, std::string state, af::Code code = af::Code::ok, std::string message = "") {
    std::lock_guard<std::mutex> lock(mu);
    versions[v] = VersionStatus{v, std::move(state), af::code_name(code), code, std::move(message)};
  }
};

ModelManager::ModelManager(ManagerOptions options, Log log)
    : options_(std::move(options)), log_(std::move(log)), table_(std::make_shared<Table>()) {}

ModelManager::~ModelManager() { stop(); }

std::map<int64_t, std::string> ModelManager::ready_versions() const {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(options_.base_path, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!it->is_directory(ec) || !fs::exists(it->path() / "signature.txt", ec)) continue;
    std::ostringstream fp;
    for (fs::directory_iterator f(it->path(), ec), fend; !ec && f != fend; f.increment(ec)) {
      std::error_code fec;
      auto size = f->is_regular_file(fec) ? f->file_size(fec) : 0;
      auto mtime = fs::last_write_time(f->path(), fec).time_since_epoch().count();
      fp << f->path().filename().string() << ':' << size << ':' << mtime << ';';
    }
    out[std::stoll(name)] = fp.str();
  }
  return out;
}

void ModelManager::poll_once() {
  auto ready = ready_versions();
  std::set<int64_t> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [v, m] : loaded_) loaded.insert(v);
  }
  auto known_bad = [&](int64_t version, const std::string& fingerprint) {
    std::lock_guard<std::mutex> lock(mu_);
    auto f = failed_.find(version);
    return f != failed_.end() && f->second == fingerprint;
  };
  // The versions the policy wants, newest first. A version that failed to load is passed
  // over, and with `latest N` the next older one stands in for it, so that a broken new
  // export leaves the one served before it in place.
  std::set<int64_t> wanted;
  const auto& p = options_.policy;
  int64_t want_n = p.kind == VersionPolicy::Kind::latest ? std::max<int64_t>(1, p.latest) : INT64_MAX;
  for (auto it = ready.rbegin(); it != ready.rend() && static_cast<int64_t>(wanted.size()) < want_n; ++it) {
    auto [version, fingerprint] = *it;
    if (p.kind == VersionPolicy::Kind::specific && std::find(p.versions.begin(), p.versions.end(), version) == p.versions.end())
      continue;
    if (loaded.count(version)) {
      wanted.insert(version);
      continue;
    }
    if (known_bad(version, fingerprint)) continue;
    // With `latest N`, a version older than the N newest ones loaded is not worth loading.
    if (p.kind == VersionPolicy::Kind::latest && static_cast<int64_t>(loaded.size()) >= want_n && version < *loaded.begin() &&
        ready.count(*loaded.begin()))
      continue;
    if (load(version, fingerprint)) wanted.insert(version);
  }
  // Unload what the policy no longer wants, once what it wants is in: a model never goes
  // from some versions served to none because of a poll.
  if (wanted.empty()) return;
  for (int64_t v : loaded)
    if (!wanted.count(v)) unload(v);
}

bool ModelManager::load(int64_t version, const std::string& fingerprint) {
  std::string dir = (fs::path(options_.base_path) / std::to_string(version)).string();
  table_->set(version, "LOADING");
  log_("loading version " + std::to_string(version) + " of model '" + options_.model_name + "' from " + dir);
  auto fail = [&](const af::Status& s) {
    table_->set(version, "END", s.code(), s.message());
    log_("version " + std::to_string(version) + " failed to load, skipped (model '" + options_.model_name + "'): " + s.to_string());
    std::lock_guard<std::mutex> lock(mu_);
    failed_[version] = fingerprint;
    return false;
  };
  auto loaded = actorflow::ServedModel::load(dir, options_.session);
  if (!loaded.ok()) return fail(loaded.status());
  auto* m = new LoadedModel;
  m->model_name = options_.model_name;
  m->version = version;
  m->dir = dir;
  m->model = std::move(*loaded);
  m->input_name = m->model.input().node().name;
  m->input_dtype = m->model.input().dtype();
  m->input_shape = m->model.input().shape();
  m->output_name = m->model.prediction().node().name;
  m->output_dtype = m->model.prediction().dtype();
  m->output_shape = m->model.prediction().shape();
  // The deleter runs when the last request on this version is done: that is the unload.
  auto table = table_;
  auto log = log_;
  std::string name = options_.model_name;
  std::shared_ptr<const LoadedModel> fresh(m, [table, log, name](const LoadedModel* p) {
    int64_t v = p->version;
    delete p;
    table->set(v, "END");
    log("version " + std::to_string(v) + " of model '" + name + "' unloaded");
  });
  if (options_.before_available) {
    if (auto s = options_.before_available(*fresh); !s.ok()) {
      fresh.reset();
      return fail(s);
    }
  }
  table_->set(version, "AVAILABLE");
  {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_[version] = std::move(fresh);
    failed_.erase(version);
  }
  log_("serving version " + std::to_string(version) + " of model '" + options_.model_name + "'");
  return true;
}

void ModelManager::unload(int64_t version) {
  std::shared_ptr<const LoadedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loaded_.find(version);
    if (it == loaded_.end()) return;
    old = std::move(it->second);
    loaded_.erase(it);
  }
  table_->set(version, "UNLOADING");
  log_("unloading version " + std::to_string(version) + " of model '" + options_.model_name + "' once its requests are done");
  // `old` drops here; requests still holding it keep it alive until they finish.
}

void ModelManager::start_polling() {
  if (options_.poll_seconds <= 0 || poller_.joinable()) return;
  poller_ = std::thread([this] {
    auto period = std::chrono::duration<double>(options_.poll_seconds);
    std::unique_lock<std::mutex> lock(poll_mu_);
    while (!stopping_) {
      if (poll_cv_.wait_for(lock, period, [this] { return stopping_; })) break;
      lock.unlock();
      poll_once();
      lock.lock();
    }
  });
}

void ModelManager::stop() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<const LoadedModel> ModelManager::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_.empty() ? nullptr : loaded_.rbegin()->second;
}

af::Result<std::shared_ptr<const LoadedModel>> ModelManager::find(int64_t version, const std::string& label) const {
  const std::string& name = options_.model_name;
  if (!label.empty()) {
    auto l = options_.labels.find(label);
    if (l == options_.labels.end()) return af::invalid_argument("model '" + name + "' has no version label '" + echo(label) + "'");
    version = l->second;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (loaded_.empty()) return af::Status(af::Code::unavailable, "model '" + name + "' has no version loaded yet");
  if (!version) return loaded_.rbegin()->second;
  auto it = loaded_.find(version);
  if (it != loaded_.end()) return it->second;
  std::string serving;
  for (auto& [v, m] : loaded_) serving += (serving.empty() ? "" : ", ") + std::to_string(v);
  return af::not_found("version " + std::to_string(version) + " of model '" + name + "' is not being served (serving " + serving + ")");
}

std::vector<int64_t> ModelManager::loaded_versions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (auto& [v, m] : loaded_) out.push_back(v);
  return out;
}

std::vector<VersionStatus> ModelManager::statuses() const {
  std::lock_guard<std::mutex> lock(table_->mu);
  std::vector<VersionStatus> out;
  // Newest first, as TF Serving lists them.
  for (auto it = table_->versions.rbegin(); it != table_->versions.rend(); ++it) out.push_back(it->second);
  return out;
}

}  // namespace serve
