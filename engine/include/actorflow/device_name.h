// Device names as TF writes them ("/job:ps/task:0/cpu:0", "/job:worker/task:1/device:GPU:1")
// and the location they denote: the task (job + index) and the device on it. The
// partitioner cuts a graph at every edge between two locations, so two spellings of one
// device must compare equal; to_string() gives the one canonical spelling.
#pragma once
#include "actorflow/api.h"
#include <string>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct DeviceName {
  std::string job;       // "" when the name leaves it out
  int task = -1;         // -1 when left out
  std::string type;      // "cpu" or "gpu" (lower case); "" when left out
  int index = -1;        // -1 when left out

  bool has_job() const { return !job.empty(); }
  bool has_task() const { return task >= 0; }
  bool has_device() const { return !type.empty(); }
  // Whatever this name leaves out, taken from `dflt` (a fully specified location); a
  // device type without an index means index 0, as TF reads "/cpu".
  DeviceName completed_by(const DeviceName& dflt) const;
  bool fully_specified() const { return has_job() && has_task() && has_device() && index >= 0; }
  // "/job:worker/task:1/cpu:0", leaving out the unset parts.
  std::string to_string() const;
  // "/job:worker/task:1": the process that owns the device.
  std::string task_name() const;
  bool operator==(const DeviceName& o) const {
    return job == o.job && task == o.task && type == o.type && index == o.index;
  }
};

// Accepts "", "/job:J", "/job:J/replica:R/task:T", "/cpu:0", "/device:CPU:0", "/gpu:1",
// "/job:J/task:T/device:GPU:1" (replica is read and ignored: one replica per task here).
// An error quotes the name and the part that could not be read.
Result<DeviceName> parse_device_name(const std::string& name);

}  // namespace actorflow

AF_PUBLIC_END
