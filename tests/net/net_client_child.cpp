// A client of two node daemons that test_net_cluster kills with -9 while its step is in
// flight ("a client killed mid-step"). Its step (net_chain_graph.h): a chain of matmuls on
// /job:worker/task:1 whose sum /job:worker/task:0 waits for. Once a step takes a second,
// it writes "1" to --port_file (the readiness file every test child writes), prints a
// line, and runs the step once more, with no deadline: the step the test interrupts.
//   net_client_child --target "/job:worker/task:0=af://H:P,/job:worker/task:1=af://H:P" --port_file F
// The token comes from ACTORFLOW_TOKEN. Exit 0 when the last step ran, 1 on an error, 2 on
// bad arguments.
#include <fstream>
#include <iostream>
#include <string>

#include "net_chain_graph.h"

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
  auto chain = aftnet::chain_step(target, actorflow::SessionOptions{}, std::chrono::seconds(1));
  if (!chain.ok()) {
    std::cerr << "net_client_child: " << chain.status().to_string() << "\n";
    return 1;
  }
  {
    std::ofstream ready(port_file);
    ready << 1 << "\n";
  }
  std::cout << "running the step to be interrupted (a chain of " << chain->depth << " matmuls)" << std::endl;
  auto last = chain->run();
  std::cout << (last.ok() ? std::string("it ran") : last.status().to_string()) << std::endl;
  return last.ok() ? 0 : 1;
}
