// Saver and the checkpoint directory protocol. A save is crash-safe by ordering: the data
// file is written under a temp name, fsynced and renamed into place (and the directory
// fsynced) before the index that names it is replaced the same way; old checkpoints are
// deleted only after the new index is durable. A kill at any point leaves an index that
// names complete files.
#include "actorflow/saver.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>

#include "actorflow/dsl_core.h"
#include "actorflow/partitioned_variables.h"
#include "core/tensor_slices.h"
#include "io/safetensors.h"

namespace actorflow {
namespace {

constexpr const char* kIndexName = "checkpoint";
constexpr size_t kMaxIndexBytes = 16u << 20;

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Index entries are plain file names inside the directory: the index decides what gets
// deleted, so a damaged or hostile one must not point elsewhere.
bool safe_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Temp files left by a save that was killed; they are never named by an index.
void remove_stale_temps(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (ends_with(n, ".safetensors.tmp") || n == std::string(kIndexName) + ".tmp") ::unlink(it->path().c_str());
  }
}

std::string list_names(const st::Reader& r) {
  std::string s;
  size_t k = 0;
  for (const st::Entry& e : r.entries()) {
    if (k == 10) return s + ", ... (" + std::to_string(r.entries().size()) + " in all)";
    s += (k++ ? ", '" : "'") + e.name + "'";
  }
  return s.empty() ? "none" : s;
}

// The dim a shard is cut along: the one where it is shorter than the whole (0 when it
// is the whole).
int slice_axis(const SaveSliceInfo& info) {
  for (size_t i = 0; i < info.full_shape.size(); ++i)
    if (info.var_shape[i] != info.full_shape[i]) return static_cast<int>(i);
  return 0;
}

}  // namespace

Result<CheckpointState> read_checkpoint_state(const std::string& dir) {
  const std::string path = join(dir, kIndexName);
  auto bytes = st::read_small_file(path, kMaxIndexBytes);
  if (!bytes.ok()) {
    if (bytes.status().code() == Code::not_found)
      return not_found("no checkpoint in '" + dir + "': the index file '" + path + "' does not exist");
    return bytes.status();
  }
  AF_ASSIGN_OR_RETURN(CheckpointState s, st::decode_checkpoint_index(*bytes, path));
  if (!safe_name(s.latest)) return data_loss("checkpoint index '" + path + "' names a bad latest file '" + s.latest + "'");
  for (const std::string& name : s.all)
    if (!safe_name(name)) return data_loss("checkpoint index '" + path + "' lists an entry that is not a file name");
  if (std::find(s.all.begin(), s.all.end(), s.latest) == s.all.end()) s.all.push_back(s.latest);
  return s;
}

Result<std::string> latest_checkpoint(const std::string& dir) {
  AF_ASSIGN_OR_RETURN(CheckpointState s, read_checkpoint_state(dir));
  std::string path = join(dir, s.latest);
  if (::access(path.c_str(), F_OK) != 0)
    return not_found("checkpoint '" + path + "', the latest named by '" + join(dir, kIndexName) + "', does not exist");
  return path;
}

Status write_checkpoint(const std::string& dir, int64_t step, const std::vector<NamedTensor>& tensors, int max_to_keep,
                        std::string* saved_path) {
  if (step < 0) return invalid_argument("write_checkpoint: step must be >= 0, got " + std::to_string(step));
  if (max_to_keep < 0) return invalid_argument("write_checkpoint: max_to_keep must be >= 0 (0 keeps all)");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return internal_error("cannot create checkpoint directory '" + dir + "': " + ec.message());
  remove_stale_temps(dir);

  const std::string name = "model.ckpt-" + std::to_string(step) + ".safetensors";
  const std::string path = join(dir, name);
  const std::string tmp = path + ".tmp";
  Status s = write_safetensors(tmp, tensors, {{"format", "actorflow-checkpoint-1"}, {"step", std::to_string(step)}}, true);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = internal_error("renaming '" + tmp + "' to '" + path + "': " + st::errno_text(errno));
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  AF_RETURN_IF_ERROR(st::fsync_dir(dir));

  // Continue the keep-list a previous process left (an unreadable index starts afresh).
  CheckpointState state;
  if (auto old = read_checkpoint_state(dir); old.ok()) state = std::move(*old);
  state.all.erase(std::remove(state.all.begin(), state.all.end(), name), state.all.end());
  state.all.push_back(name);
  state.latest = name;
  std::vector<std::string> dropped;
  if (max_to_keep > 0 && state.all.size() > static_cast<size_t>(max_to_keep)) {
    auto cut = state.all.end() - max_to_keep;
    dropped.assign(state.all.begin(), cut);
    state.all.erase(state.all.begin(), cut);
  }
  AF_ASSIGN_OR_RETURN(std::string index, st::encode_checkpoint_index(state));
  AF_RETURN_IF_ERROR(st::atomic_write_file(join(dir, kIndexName), index));
  for (const std::string& d : dropped) {
    if (!safe_name(d) || d == name || d == kIndexName) continue;
    if (::unlink(join(dir, d).c_str()) != 0 && errno != ENOENT)
      return internal_error("deleting old checkpoint '" + join(dir, d) + "': " + st::errno_text(errno));
  }
  // A save killed between its rename and its index update left a whole checkpoint that no
  // index names; nothing restores from it, so it goes once an index is durable again.
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.rfind("model.ckpt-", 0) == 0 && ends_with(n, ".safetensors") &&
        std::find(state.all.begin(), state.all.end(), n) == state.all.end())
      ::unlink(it->path().c_str());
  }
  if (saved_path) *saved_path = path;
  return Status::OK();
}

// ---------------------------------------------------------------- Saver

Saver::Saver(Graph& graph, std::vector<Output> var_list, int max_to_keep) : graph_(&graph), max_to_keep_(max_to_keep) {
  if (max_to_keep < 0)
    throw Error(invalid_argument("Saver: max_to_keep must be >= 0 (0 keeps all), got " + std::to_string(max_to_keep)));
  if (var_list.empty())
    for (int id : graph.collection("variables")) var_list.emplace_back(&graph, id, 0);
  std::set<std::string> seen;
  for (const Output& v : var_list) {
    if (!v.valid() || v.graph() != &graph) throw Error(invalid_argument("Saver: a var_list entry is not an output of this graph"));
    const Node& n = v.node();
    if (n.op != "VariableV2")
      throw Error(invalid_argument("Saver: var_list entry '" + n.name + "' is a " + n.op + ", not a variable"));
    if (!st::st_dtype_name(v.dtype()))
      throw Error(unimplemented("Saver: variable '" + n.name + "' has dtype " + dtype_name(v.dtype()) +
                                ", which a safetensors checkpoint cannot hold"));
    if (!seen.insert(n.name).second) continue;
    vars_.push_back(v);
    names_.push_back(n.name);
  }
  // A partitioned variable is written whole, as TF's Saver writes one: every shard of it
  // must be in the list, and no other variable may take its name.
  std::map<std::string, std::pair<std::vector<int64_t>, int64_t>> covered;  // full shape, rows held
  for (const Output& v : vars_) {
    std::optional<SaveSliceInfo> info = save_slice_info(v);
    if (!info) continue;
    if (seen.count(info->full_name))
      throw Error(invalid_argument("Saver: variable '" + info->full_name + "' and the shards of the partitioned variable '" +
                                   info->full_name + "' would be saved under one name"));
    auto [it, fresh] = covered.try_emplace(info->full_name, info->full_shape, 0);
    if (it->second.first != info->full_shape)
      throw Error(invalid_argument("Saver: the shards of '" + info->full_name + "' disagree about its shape"));
    it->second.second += info->var_shape[static_cast<size_t>(slice_axis(*info))];
  }
  for (const Output& v : vars_) {
    std::optional<SaveSliceInfo> info = save_slice_info(v);
    if (!info) continue;
    const auto& [full_shape, rows] = covered[info->full_name];
    if (rows != full_shape[static_cast<size_t>(slice_axis(*info))])
      throw Error(invalid_argument("Saver: var_list holds only some shards of the partitioned variable '" +
                                   info->full_name + "' " + Shape(full_shape).to_string() +
                                   "; a checkpoint holds it whole, so pass all of them"));
  }
  NameScope scope(graph, "save");
  for (const Output& v : vars_) {
    // The assign must run where the variable lives (its ResourceMgr), e.g. on a ps task.
    std::optional<DeviceScope> on_device;
    if (!v.node().device.empty()) on_device.emplace(graph, v.node().device);
    Output ph = placeholder(graph, v.dtype(), v.shape(), "value");
    feeds_.push_back(ph);
    assigns_.emplace_back(assign(v, ph, "restore"));
  }
}

Status Saver::check_session(Session& sess, const char* what) const {
  if (&sess.graph() != graph_)
    return invalid_argument(std::string("Saver::") + what + ": the session runs another graph than the Saver's");
  return Status::OK();
}

Status Saver::save(Session& sess, const std::string& dir, int64_t step, std::string* saved_path) {
  AF_RETURN_IF_ERROR(check_session(sess, "save"));
  std::vector<NamedTensor> tensors;
  if (!vars_.empty()) {
    // One step: every variable is read at the same point between training steps.
    std::vector<Fetch> fetches(vars_.begin(), vars_.end());
    auto values = sess.run(fetches);
    if (!values.ok()) return values.status().with_context("Saver::save: reading the variables");
    // Shards go into their whole variable, written once under its name.
    std::map<std::string, size_t> whole;
    for (size_t i = 0; i < vars_.size(); ++i) {
      std::optional<SaveSliceInfo> info = save_slice_info(vars_[i]);
      if (!info) {
        tensors.push_back({names_[i], (*values)[i]});
        continue;
      }
      auto [it, fresh] = whole.try_emplace(info->full_name, tensors.size());
      if (fresh) tensors.push_back({info->full_name, Tensor(vars_[i].dtype(), Shape(info->full_shape))});
      const int axis = slice_axis(*info);
      write_slice_along((*values)[i], axis, info->var_offset[static_cast<size_t>(axis)], &tensors[it->second].value);
    }
  }
  std::lock_guard<std::mutex> lock(save_mu_);
  return write_checkpoint(dir, step, tensors, max_to_keep_, saved_path);
}

Status Saver::restore(Session& sess, const std::string& dir) {
  AF_RETURN_IF_ERROR(check_session(sess, "restore"));
  auto path = latest_checkpoint(dir);
  if (!path.ok()) return path.status().with_context("Saver::restore");
  return restore_file(sess, *path);
}

Status Saver::restore_file(Session& sess, const std::string& path) {
  AF_RETURN_IF_ERROR(check_session(sess, "restore"));
  auto opened = st::Reader::open(path);
  if (!opened.ok()) return opened.status().with_context("Saver::restore");
  const st::Reader& reader = *opened;
  std::set<std::string> wanted;
  for (size_t i = 0; i < vars_.size(); ++i) {
    // A shard is restored from its whole variable, whatever the number of shards saved.
    std::optional<SaveSliceInfo> info = save_slice_info(vars_[i]);
    const std::string name = info ? info->full_name : names_[i];
    const Shape shape = info ? Shape(info->full_shape) : vars_[i].shape();
    wanted.insert(name);
    const st::Entry* e = reader.find(name);
    if (!e)
      return not_found("Saver::restore: checkpoint '" + path + "' has no tensor for variable '" + name +
                       "' (it holds " + list_names(reader) + ")");
    DType t;
    if (!st::st_dtype_to_af(e->dtype, &t) || t != vars_[i].dtype())
      return invalid_argument("Saver::restore: variable '" + name + "' is " + dtype_name(vars_[i].dtype()) +
                              " but checkpoint '" + path + "' stores it as " + e->dtype);
    if (Shape(e->shape) != shape)
      return invalid_argument("Saver::restore: variable '" + name + "' has shape " + shape.to_string() +
                              " but checkpoint '" + path + "' stores shape " + Shape(e->shape).to_string());
  }
  std::map<std::string, Tensor> values;
  AF_RETURN_IF_ERROR(reader.read(&wanted, &values).with_context("Saver::restore"));
  if (vars_.empty()) return Status::OK();
  FeedDict feeds;
  for (size_t i = 0; i < vars_.size(); ++i) {
    std::optional<SaveSliceInfo> info = save_slice_info(vars_[i]);
    if (!info) {
      feeds.emplace_back(feeds_[i], values[names_[i]]);
      continue;
    }
    const int axis = slice_axis(*info);
    const size_t a = static_cast<size_t>(axis);
    feeds.emplace_back(feeds_[i], slice_along(values[info->full_name], axis, info->var_offset[a], info->var_shape[a]));
  }
  auto r = sess.run({}, feeds, assigns_);
  if (!r.ok()) return r.status().with_context("Saver::restore: assigning the values of '" + path + "'");
  return Status::OK();
}

}  // namespace actorflow
