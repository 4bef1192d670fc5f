// See port_file.h.
#include "actorflow/net/port_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace actorflow::net {

Status write_port_file(const std::string& path, int port) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status(Code::unavailable, "cannot write --port_file " + path + " (writing " + tmp + " failed)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return Status(Code::unavailable, "cannot write --port_file " + path + ": " + std::strerror(err));
  }
  return Status::OK();
}

}  // namespace actorflow::net
