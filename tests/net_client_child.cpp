// A client of two node daemons that test_net_cluster kills with -9 while its step is in
// flight ("a client killed mid-step"). Its graph: a chain of 512x512 matmuls on
// /job:worker/task:1, whose result /job:worker/task:0 waits for. It deepens the chain
// until one step takes a second, writes "1" to --port_file (the readiness file every
// test child writes), prints a line, and runs the same step once more, with no deadline:
// that is the step the test interrupts.
//   net_client_child --target "/job:worker/task:0=af://H:P,/job:worker/task:1=af://H:P" --port_file F
// The token comes from ACTORFLOW_TOKEN. Exit 0 when the last step ran, 1 on an error, 2 on
// bad arguments.
#include <actorflow/actorflow.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>

namespace af = actorflow;

int main(int argc, char** argv) {
  std::string target, port_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--target") target = argv[i + 1];
    else if (flag == "--port_file") port_file = argv[i + 1];
  }
  if (target.empty() || port_file.empty()) {
    std::cerr << "usage: net_client_child --target CLUSTER_TARGET --port_file FILE\n";
    return 2;
  }
  const af::Tensor in = af::Tensor::filled(af::f32, {512, 512}, 0.5);
  for (int depth = 32; depth <= (1 << 14); depth *= 2) {
    af::Graph g;
    af::Output x, y, z;
    {
      af::DeviceScope far(g, "/job:worker/task:1");
      x = af::placeholder(g, af::f32, {512, 512}, "x");
      y = x;
      for (int i = 0; i < depth; ++i) y = af::matmul(y, x) * (1.0 / 256);  // stays 0.5: no denormals
    }
    {
      af::DeviceScope near(g, "/job:worker/task:0");
      z = af::reduce_sum(y, {}, false, "waits_for_the_chain");
    }
    auto sess = af::Session::create(g, target);
    if (!sess.ok()) {
      std::cerr << "net_client_child: " << sess.status().to_string() << "\n";
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto first = sess->run({z}, {{x, in}});
    if (!first.ok()) {
      std::cerr << "net_client_child: " << first.status().to_string() << "\n";
      return 1;
    }
    if (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) continue;
    {
      std::ofstream ready(port_file);
      ready << 1 << "\n";
    }
    std::cout << "running the step to be interrupted (a chain of " << depth << " matmuls)" << std::endl;
    auto second = sess->run({z}, {{x, in}});
    std::cout << (second.ok() ? std::string("it ran") : second.status().to_string()) << std::endl;
    return second.ok() ? 0 : 1;
  }
  std::cerr << "net_client_child: no chain took a second\n";
  return 1;
}
