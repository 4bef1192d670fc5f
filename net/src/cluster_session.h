// The client of a graph on node daemons: Session::create(g, target) with a target that
// names one daemon, or one daemon per task,
//   "af://h0:2222"                                     (one daemon: the whole graph there)
//   "af://h0:2222,af://h1:2222"                        (tasks /job:worker/task:0, 1, ...)
//   "/job:ps/task:0=af://h0:2222,/job:worker/task:0=af://h1:2222"
// Nodes run on the daemon of the task their device names; nodes without a device on the
// first task listed. See cluster_session.cpp.
#pragma once
#include <memory>

#include "actorflow/session.h"

namespace actorflow::net {

Result<std::unique_ptr<SessionImpl>> make_cluster_session(Graph& g, const SessionOptions& opts);

}  // namespace actorflow::net
