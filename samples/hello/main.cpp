// The classic first program: a string constant and 10 + 32, computed through a graph.
#include <actorflow/actorflow.h>

#include <iostream>

#include "kit/flags.h"

namespace af = actorflow;

int main(int argc, char** argv) {
  // No options but --help: anything else is refused (exit 2), as the other samples do.
  kit::parse_simple_flags(argc, argv, "hello", {});
  af::Graph g;
  auto hello = af::constant(g, "Hello, ActorFlow!", "hello");
  auto a = af::constant(g, 10, "a");
  auto b = af::constant(g, 32, "b");
  auto sum = a + b;

  auto sess = af::Session::create(g);
  if (!sess.ok()) {
    std::cerr << sess.status().to_string() << "\n";
    return 1;
  }
  auto out = sess->run({hello, sum});
  if (!out.ok()) {
    std::cerr << out.status().to_string() << "\n";
    return 1;
  }
  std::cout << (*out)[0] << "\n" << (*out)[1] << "\n";
  std::cout << "RESULT greeting=ok sum=" << (*out)[1].item<int32_t>() << "\n";
  return 0;
}
