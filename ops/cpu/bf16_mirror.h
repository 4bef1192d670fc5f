// bfloat16 copies of variables' values, kept between the products that read them.
//
// A bfloat16 product converts its float32 operands first. A dense layer's weight is an
// operand of two products a step (y = x * W and the input gradient dy * W^T) and of
// every evaluation step, and converting fc1's 3.2 M floats of the CNN took ~1.9 ms a
// time. A variable's buffer counts its writes (Buffer::note_write, by every kernel that
// writes a variable in place), so one conversion serves until the next write: at most
// once per training step, once for all of an evaluation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "actorflow/tensor.h"

namespace actorflow::cpu {

// The whole buffer's floats in bfloat16 (round to nearest even, as oneDNN converts), in
// the same order, 64-byte aligned.
class Bf16Mirror {
 public:
  virtual ~Bf16Mirror() = default;
  virtual const uint16_t* data() const = 0;
};

// Buffers below this many floats are converted per call: the copy would save little.
constexpr int64_t kMinMirroredFloats = int64_t{1} << 18;

// The mirror of `source` (a float32 buffer in host memory) when it is a variable's value
// of at least kMinMirroredFloats: kept from an earlier call while no write has been
// counted since, converted now otherwise (once: callers racing for it wait for the first).
// Null when `source` does not qualify or oneDNN is not built in. The mirror stays valid
// for as long as the caller holds it and holds `source` unwritten (a dense update copies
// a buffer someone holds, so holding the operand's tensor is enough).
std::shared_ptr<const Bf16Mirror> bf16_mirror(const std::shared_ptr<Buffer>& source);

// How many mirrors are kept now, and how many conversions were made in all (tests).
size_t bf16_mirrors_kept();
uint64_t bf16_mirror_conversions();

}  // namespace actorflow::cpu
