// The wall-clock time a log line carries ("14:03:27.512", local time, milliseconds), so
// that the lines of several processes (a cluster's daemons, scripts/chaos's kills) can
// be put in one order when a failure is read from their logs.
#pragma once
#include <string>

namespace actorflow {

std::string log_time();

}  // namespace actorflow
