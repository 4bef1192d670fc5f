#include "model_manager.h"

#include <chrono>
#include <filesystem>
#include <sstream>

namespace serve {

namespace af = actorflow;
namespace fs = std::filesystem;

struct ModelManager::Table {
  std::mutex mu;
  std::map<int64_t, VersionStatus> versions;

  void set(int64_t v, std::string state, std::string code = "OK", std::string message = "") {
    std::lock_guard<std::mutex> lock(mu);
    versions[v] = VersionStatus{v, std::move(state), std::move(code), std::move(message)};
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
  int64_t serving = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    serving = current_ ? current_->version : 0;
  }
  // The newest version not known to fail; versions older than the one served are not
  // candidates while it is still on disk.
  for (auto it = ready.rbegin(); it != ready.rend(); ++it) {
    auto [version, fingerprint] = *it;
    if (version == serving) return;
    if (version < serving && ready.count(serving)) return;
    bool known_bad;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto f = failed_.find(version);
      known_bad = f != failed_.end() && f->second == fingerprint;
    }
    if (known_bad) continue;
    load(version, fingerprint);
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && current_->version == version) return;
  }
}

void ModelManager::load(int64_t version, const std::string& fingerprint) {
  std::string dir = (fs::path(options_.base_path) / std::to_string(version)).string();
  table_->set(version, "LOADING");
  log_("loading version " + std::to_string(version) + " of model '" + options_.model_name + "' from " + dir);
  auto loaded = kit::ServedModel::load(dir, options_.session);
  if (!loaded.ok()) {
    table_->set(version, "END", af::code_name(loaded.status().code()), loaded.status().message());
    log_("version " + std::to_string(version) + " failed to load, skipped: " + loaded.status().to_string());
    std::lock_guard<std::mutex> lock(mu_);
    failed_[version] = fingerprint;
    return;
  }
  auto* m = new LoadedModel;
  m->version = version;
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
  std::shared_ptr<const LoadedModel> fresh(m, [table, log](const LoadedModel* p) {
    int64_t v = p->version;
    delete p;
    table->set(v, "END");
    log("version " + std::to_string(v) + " unloaded");
  });
  table_->set(version, "AVAILABLE");
  std::shared_ptr<const LoadedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(current_);
    current_ = std::move(fresh);
    failed_.erase(version);
  }
  log_("serving version " + std::to_string(version) + " of model '" + options_.model_name + "'");
  if (old) {
    table_->set(old->version, "UNLOADING");
    log_("unloading version " + std::to_string(old->version) + " once its requests are done");
  }
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
  return current_;
}

std::vector<VersionStatus> ModelManager::statuses() const {
  std::lock_guard<std::mutex> lock(table_->mu);
  std::vector<VersionStatus> out;
  // Newest first, as TF Serving lists them.
  for (auto it = table_->versions.rbegin(); it != table_->versions.rend(); ++it) out.push_back(it->second);
  return out;
}

}  // namespace serve
