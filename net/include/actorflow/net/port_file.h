// How a program listening on port 0 tells whoever started it which port it got: the
// --port_file of actorflow-node and actorflow-serve (tests and launchers read it).
#pragma once
#include "actorflow/api.h"
#include <string>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// Writes `port` and a newline to `path` whole: written to a file of this process's own
// beside it, then renamed, so a reader never sees half a port, and processes that were
// given one path (a launcher starting every task alike) never trip over each other's
// temporary file: the last one's port is what stays.
Status write_port_file(const std::string& path, int port);

}  // namespace actorflow::net

AF_PUBLIC_END
