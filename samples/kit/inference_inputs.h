// The samples' `--mode inference` input: --inference_test_file read as CSV or IDX, told
// by --inference_format or by the file's first bytes. (Exporting and loading the model
// itself is the library's: actorflow/saved_model.h.)
#pragma once
#include <cstdint>
#include <string>

#include <actorflow/actorflow.h>

namespace kit {

// "idx" when the file (gunzipped) starts with IDX's magic bytes: 0, 0, an element type
// (0x08, 0x09, 0x0B-0x0E) and a rank from 1 to 4; "csv" otherwise.
actorflow::Result<std::string> detect_input_format(const std::string& path);

// --inference_test_file as f32 [N, features]: `format` is "csv", "idx" or "auto"
// (detect_input_format). IDX bytes are scaled to [0, 1] as the training images were.
actorflow::Result<actorflow::Tensor> load_inference_inputs(const std::string& path, const std::string& format,
                                                           int64_t features);

}  // namespace kit
