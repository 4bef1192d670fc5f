#include "actorflow/device.h"
#include "actorflow/dtype.h"

namespace actorflow {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::boolean: return 1;
    case DType::string: return sizeof(std::string);
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
    case DType::string: return "string";
    default: return "invalid";
  }
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::boolean, DType::string}) {
    if (name == dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

const char* device_type_name(DeviceType t) { return t == DeviceType::CPU ? "CPU" : "GPU"; }

}  // namespace actorflow
