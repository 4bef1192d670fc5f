#include "flags.h"

#include <CLI/CLI.hpp>

#include <sstream>

namespace kit {

std::vector<int> Flags::network() const {
  std::vector<int> widths;
  std::istringstream in(model_network);
  int w;
  while (in >> w) widths.push_back(w);
  return widths;
}

void per_model_paths(Flags& f, const Flags& defaults) {
  if (f.checkpoint_path == defaults.checkpoint_path) f.checkpoint_path += "/" + f.model;
  if (f.output_path == defaults.output_path) f.output_path += "/" + f.model;
  if (f.saved_model_path == defaults.saved_model_path) f.saved_model_path += "/" + f.model;
}

Flags parse_flags(int argc, char** argv, const std::string& program, const Flags& defaults) {
  Flags f = defaults;
  CLI::App app{program};
  app.add_option("--learning_rate", f.learning_rate, "learning rate")->capture_default_str();
  app.add_option("--epoch_number", f.epoch_number, "epochs to train")->capture_default_str();
  app.add_option("--batch_size", f.batch_size, "examples per step")->capture_default_str();
  app.add_option("--optimizer", f.optimizer, "sgd|momentum|adagrad|adadelta|adam|ftrl|rmsprop")
      ->check(CLI::IsMember({"sgd", "momentum", "adagrad", "adadelta", "adam", "ftrl", "rmsprop"}))
      ->capture_default_str();
  app.add_option("--model", f.model, "model name")->capture_default_str();
  app.add_option("--model_network", f.model_network, "hidden layer widths, e.g. \"128 32 8\"")->capture_default_str();
  app.add_option("--enable_bn", f.enable_bn, "batch normalization")->capture_default_str();
  app.add_option("--enable_dropout", f.enable_dropout, "dropout")->capture_default_str();
  app.add_option("--dropout_keep_prob", f.dropout_keep_prob, "keep probability")->capture_default_str();
  app.add_option("--enable_lr_decay", f.enable_lr_decay, "exponential learning-rate decay")->capture_default_str();
  app.add_option("--lr_decay_rate", f.lr_decay_rate, "decay rate per epoch")->capture_default_str();
  app.add_option("--steps_to_validate", f.steps_to_validate, "validate every N steps")->capture_default_str();
  app.add_option("--checkpoint_path", f.checkpoint_path, "checkpoint directory")->capture_default_str();
  app.add_option("--output_path", f.output_path, "TensorBoard summaries directory")->capture_default_str();
  app.add_option("--mode", f.mode, "train|train_from_scratch|export|inference")
      ->check(CLI::IsMember({"train", "train_from_scratch", "export", "inference"}))
      ->capture_default_str();
  app.add_option("--saved_model_path", f.saved_model_path, "exported model directory")->capture_default_str();
  app.add_option("--model_version", f.model_version, "exported model version")->capture_default_str();
  app.add_option("--inference_test_file", f.inference_test_file, "inputs for inference mode");
  app.add_option("--inference_result_file", f.inference_result_file, "predictions, one per line")->capture_default_str();
  app.add_option("--seed", f.seed, "random seed")->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads (0 = all cores)")->capture_default_str();
  app.add_option("--data_dir", f.data_dir, "data location")->capture_default_str();
  app.add_option("--max_steps", f.max_steps, "stop after this many steps (-1: no limit)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return f;
}

}  // namespace kit
