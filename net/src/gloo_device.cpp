#include "gloo_device.h"

#include "actorflow/library_threads.h"

#include <gloo/transport/tcp/device.h>

#include <string>

namespace actorflow::net {

std::shared_ptr<gloo::transport::Device> make_gloo_device(const std::string& host) {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  ScopedBatchPolicy batch;
  return gloo::transport::tcp::CreateDevice(attr);
}

}  // namespace actorflow::net
