// Linear regression, one sample at a time: y = 2x + 10 + noise over 100 seeded points,
// SGD with learning rate 0.01 for 10 epochs. Ends near w = 2, b = 10.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "kit/flags.h"
#include "linear_regression.h"

int main(int argc, char** argv) {
  // No flags: --help says so, and a training flag of the other samples is refused.
  kit::parse_simple_flags(argc, argv, "linear_regression", {});
  auto start = std::chrono::steady_clock::now();
  linreg::Data data = linreg::make_data(100, 42);
  auto fit = linreg::train(data, 10, 0.01, [](int epoch, double w, double b) {
    std::printf("Epoch: %d, w: %.4f, b: %.4f\n", epoch, w, b);
  });
  if (!fit.ok()) {
    std::cerr << fit.status().to_string() << "\n";
    return 1;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("RESULT w=%.4f b=%.4f epochs=%d seconds=%.3f\n", fit->w, fit->b, fit->epochs, seconds);
  return 0;
}
