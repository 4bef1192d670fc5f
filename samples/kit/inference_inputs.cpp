#include "inference_inputs.h"

#include <actorflow/data/readers.h>

#include <algorithm>

namespace kit {

namespace af = actorflow;
namespace ad = actorflow::data;

af::Result<std::string> detect_input_format(const std::string& path) {
  AF_ASSIGN_OR_RETURN(std::string bytes, ad::read_file_maybe_gzip(path));
  auto u8 = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  // No text file starts with two NUL bytes, so IDX's magic cannot be mistaken for CSV.
  bool idx = bytes.size() >= 4 && u8(0) == 0 && u8(1) == 0 && (u8(2) == 0x08 || u8(2) == 0x09 || (u8(2) >= 0x0B && u8(2) <= 0x0E)) &&
             u8(3) >= 1 && u8(3) <= 4;
  return std::string(idx ? "idx" : "csv");
}

af::Result<af::Tensor> load_inference_inputs(const std::string& path, const std::string& format, int64_t features) {
  std::string kind = format;
  if (kind == "auto") {
    AF_ASSIGN_OR_RETURN(kind, detect_input_format(path));
  }
  af::Tensor x;
  if (kind == "idx") {
    AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
    int64_t n = raw.rank() > 0 ? raw.dim(0) : 0;
    x = af::Tensor(af::f32, {n, raw.num_elements() / std::max<int64_t>(1, n)});
    // Bytes are pixels, scaled as the training images were; other types are taken as they are.
    double scale = raw.dtype() == af::u8 ? 1.0 / 255.0 : 1.0;
    for (int64_t i = 0; i < raw.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(raw.element_as_double(i) * scale);
  } else if (kind == "csv") {
    ad::CsvOptions o;
    o.header = false;  // rows of features; sklearn's files are still recognised (their target is dropped)
    AF_ASSIGN_OR_RETURN(ad::CsvData d, ad::read_csv(path, o));
    x = d.features;
  } else {
    return af::invalid_argument("inference input format '" + format + "' is not one of auto, csv, idx");
  }
  if (x.dim(1) != features)
    return af::invalid_argument("'" + path + "' (read as " + kind + ") has rows of " + std::to_string(x.dim(1)) +
                                " values, the model takes " + std::to_string(features));
  return x;
}

}  // namespace kit
