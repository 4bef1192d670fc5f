// Where a buffer lives and where a kernel runs.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <string>

AF_PUBLIC_BEGIN

namespace actorflow {

enum class DeviceType : uint8_t { CPU = 0, GPU = 1 };

struct DeviceId {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  std::string to_string() const { return (type == DeviceType::CPU ? "cpu:" : "gpu:") + std::to_string(index); }
  bool operator==(const DeviceId& o) const { return type == o.type && index == o.index; }
};

const char* device_type_name(DeviceType t);

}  // namespace actorflow

AF_PUBLIC_END
