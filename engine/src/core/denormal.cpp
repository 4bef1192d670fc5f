#include "actorflow/denormal.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace actorflow {
namespace {

// Each CPU: the control register's flush bit, and how to read and write the register.
#if defined(__SSE__) || defined(__x86_64__)
// MXCSR's flush-to-zero (bit 15). Denormals-are-zero (bit 6) stays off: a denormal that
// comes in (a feed, a checkpoint) keeps its value; only results are flushed.
constexpr unsigned long long kFlush = 0x8000u;
unsigned long long read_mode() { return _mm_getcsr(); }
void write_mode(unsigned long long m) { _mm_setcsr(static_cast<unsigned>(m)); }
#elif defined(__aarch64__)
// FPCR's FZ (bit 24): inputs and results both flush.
constexpr unsigned long long kFlush = 1ull << 24;
unsigned long long read_mode() {
  unsigned long long m;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(m));
  return m;
}
void write_mode(unsigned long long m) { __asm__ __volatile__("msr fpcr, %0" : : "r"(m)); }
#else
constexpr unsigned long long kFlush = 0;
unsigned long long read_mode() { return 0; }
void write_mode(unsigned long long) {}
#endif

constexpr bool kHasMode = kFlush != 0;
unsigned long long flushing(unsigned long long m) { return m | kFlush; }

}  // namespace

ScopedFlushDenormal::ScopedFlushDenormal() : saved_(read_mode()) {
  const unsigned long long want = flushing(saved_);
  if (want != saved_) {
    write_mode(want);
    changed_ = true;
  }
}

ScopedFlushDenormal::~ScopedFlushDenormal() {
  if (changed_) write_mode(saved_);
}

void flush_denormals_on_this_thread() { write_mode(flushing(read_mode())); }

bool denormals_flushed_on_this_thread() {
  const unsigned long long m = read_mode();
  return kHasMode && flushing(m) == m;
}

}  // namespace actorflow
