// CRC-32C (Castagnoli), the checksum of GraphDef files, TFRecord and TensorBoard event
// files. Uses the SSE4.2 crc32 instruction when the build targets it, slicing-by-8
// tables otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace actorflow {

// Continues a CRC-32C over more bytes: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }
inline uint32_t crc32c(std::string_view s) { return crc32c(s.data(), s.size()); }

// The table-driven implementation, whatever the build targets (for tests and benchmarks).
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);

// TFRecord stores checksums masked, because a CRC of data that itself holds CRCs is weak.
inline constexpr uint32_t kCrc32cMaskDelta = 0xa282ead8u;
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrc32cMaskDelta; }
inline uint32_t crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - kCrc32cMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace actorflow
