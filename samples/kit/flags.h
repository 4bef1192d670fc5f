// The command-line flags every training sample shares (the seeds' set, spelled the same:
// --epoch_number 10 or --epoch_number=10).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kit {

struct Flags {
  double learning_rate = 0.01;
  int epoch_number = 10;
  int batch_size = 64;
  std::string optimizer = "sgd";  // sgd|momentum|adagrad|adadelta|adam|ftrl|rmsprop
  std::string model = "mlp";
  std::string model_network = "128 32 8";
  bool enable_bn = false;
  bool enable_dropout = false;
  double dropout_keep_prob = 0.5;
  bool enable_lr_decay = false;
  double lr_decay_rate = 0.96;
  int steps_to_validate = 100;
  std::string checkpoint_path = "./checkpoint";
  std::string output_path = "./tensorboard";
  std::string mode = "train";  // train|train_from_scratch|export|inference
  std::string saved_model_path = "./model";
  int model_version = 1;
  std::string inference_test_file;
  std::string inference_result_file = "./inference_result.txt";
  int64_t seed = 1;
  int threads = 0;  // 0 = all cores
  std::string data_dir;      // where the sample's data lives (a default per sample)
  int64_t max_steps = -1;    // stop early (tests and quick runs)

  // Layer widths parsed from model_network ("128 32 8" -> {128, 32, 8}).
  std::vector<int> network() const;
};

// Default checkpoint/summary/export paths get the model name appended, so models of one
// sample do not resume from each other's checkpoints.
void per_model_paths(Flags& f, const Flags& defaults);

// Parses argv; on --help or a bad flag prints the message and exits (0 or 2).
Flags parse_flags(int argc, char** argv, const std::string& program, const Flags& defaults);

}  // namespace kit
