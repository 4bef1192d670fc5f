#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace kit {

ProgressBar::ProgressBar(int epoch, int epochs, int64_t total)
    : epoch_(epoch), epochs_(epochs), total_(total), start_(std::chrono::steady_clock::now()), last_draw_(start_),
      tty_(isatty(fileno(stderr)) != 0) {}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t examples, double loss) {
  done_ += examples;
  loss_sum_ += loss;
  loss_count_++;
  auto now = std::chrono::steady_clock::now();
  // Redraw at most 10 times a second: printing must not slow training down.
  if (tty_ && now - last_draw_ > std::chrono::milliseconds(100)) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::draw(bool final) {
  double s = seconds();
  double rate = s > 0 ? static_cast<double>(done_) / s : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
  int width = 30;
  int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : width;
  if (filled > width) filled = width;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
  std::fprintf(stderr, "%sEpoch %d/%d [%s] %lld/%lld  %.0f ex/s  ETA %.1fs  loss %.4f", tty_ ? "\r" : "", epoch_, epochs_,
               bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_), rate, final ? 0.0 : eta,
               loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0);
  std::fflush(stderr);
}

void ProgressBar::finish(const std::string& extra) {
  draw(true);
  std::fprintf(stderr, "  %.2fs%s%s\n", seconds(), extra.empty() ? "" : "  ", extra.c_str());
}

}  // namespace kit
