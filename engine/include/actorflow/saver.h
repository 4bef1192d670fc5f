// Checkpoints: af::Saver writes variables (weights, optimizer slots, global_step) as one
// safetensors file per save, <dir>/model.ckpt-<step>.safetensors, next to an index file
// <dir>/checkpoint that names the latest and the kept ones. Files appear atomically (temp
// file, fsync, rename, fsync of the directory), so a process killed mid-save leaves the
// previous checkpoint intact. safetensors has no checksum, so the writer stores CRC-32Cs
// of the header and of the data (whole and per tensor) in "__metadata__"; readers verify
// them when present and accept plain safetensors files written by other tools.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/session.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct NamedTensor {
  std::string name;
  Tensor value;
};

// ---- safetensors files ----

// Writes `tensors` (f32, f64, i32, i64, u8, bool; host memory) to `path` in safetensors
// format, adding the CRC-32C entries to `metadata` (whose keys may not start with
// "crc32c"). Not atomic by itself and not fsynced unless `sync` is set.
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {}, bool sync = false);

// Reads every tensor of a safetensors file, verifying its structure and, when present,
// its CRC-32Cs. Errors (data_loss for damage) name the file and the tensor.
Result<std::vector<NamedTensor>> read_safetensors(const std::string& path,
                                                  std::map<std::string, std::string>* metadata = nullptr);

// ---- checkpoint directories ----

struct CheckpointState {
  std::string latest;            // file name relative to the directory
  std::vector<std::string> all;  // kept checkpoints, oldest first; includes `latest`
};

// The index <dir>/checkpoint, parsed; not_found when there is none.
Result<CheckpointState> read_checkpoint_state(const std::string& dir);
// The path of the newest checkpoint in `dir`; not_found when there is none.
Result<std::string> latest_checkpoint(const std::string& dir);

// What Saver::save does once it has the values: writes <dir>/model.ckpt-<step>.safetensors
// atomically, points the index at it, then deletes the checkpoints beyond the newest
// `max_to_keep` (0 keeps all). Leftover temp files of an interrupted save are removed, so
// one writer per directory at a time. `saved_path` receives the file's path.
Status write_checkpoint(const std::string& dir, int64_t step, const std::vector<NamedTensor>& tensors,
                        int max_to_keep = 5, std::string* saved_path = nullptr);

class Saver {
 public:
  // var_list: VariableV2 outputs to save; empty = every variable in the graph's
  // "variables" collection now (weights, optimizer slots, global_step). Builds, once, a
  // placeholder and an Assign per variable for restoring. That is graph building, so like
  // every DSL call it throws af::Error (for a var_list entry that is not a variable, a
  // string variable, which safetensors cannot hold, or a negative max_to_keep); it touches
  // no file. save() and restore() touch files and return a Status.
  explicit Saver(Graph& graph, std::vector<Output> var_list = {}, int max_to_keep = 5);

  // Reads every variable in one step (a consistent snapshot) and writes a checkpoint.
  Status save(Session& sess, const std::string& dir, int64_t step, std::string* saved_path = nullptr);
  // Restores the latest checkpoint of `dir`.
  Status restore(Session& sess, const std::string& dir);
  // Restores one checkpoint file. Everything is checked (file integrity, every variable
  // present with its dtype and shape) before any variable is assigned, so a failed restore
  // changes nothing. Tensors in the file that the var_list lacks are ignored.
  Status restore_file(Session& sess, const std::string& path);

  const std::vector<Output>& var_list() const { return vars_; }
  int max_to_keep() const { return max_to_keep_; }

 private:
  Status check_session(Session& sess, const char* what) const;

  Graph* graph_;
  int max_to_keep_;
  std::vector<Output> vars_;
  std::vector<std::string> names_;
  std::vector<Output> feeds_;
  std::vector<Operation> assigns_;
  std::mutex save_mu_;
};

}  // namespace actorflow

AF_PUBLIC_END
