// See bf16_mirror.h.
#include "cpu/bf16_mirror.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>

#include "cpu/aligned_buffer.h"
#include "cpu/onednn_matmul.h"

#ifdef AF_HAVE_ONEDNN
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace actorflow::cpu {

#ifdef AF_HAVE_ONEDNN
namespace {

// At most this many mirrors and bytes are kept; the least recently used goes first.
constexpr size_t kMaxMirrors = 16;
constexpr size_t kMaxBytes = size_t{512} << 20;

struct Entry final : Bf16Mirror {
  std::weak_ptr<Buffer> source;
  uint64_t writes = 0;  // the source's count when converted
  size_t floats = 0;
  AlignedBuffer storage;
  const uint16_t* halves = nullptr;
  bool ready = false, failed = false;  // under g_mu
  const uint16_t* data() const override { return halves; }
};

// A product waits this long at most for another thread's conversion of the same buffer
// (a few ms at most), then converts its operand itself.
constexpr auto kWaitForOther = std::chrono::seconds(10);

std::mutex g_mu;
std::condition_variable g_ready;
std::list<std::shared_ptr<Entry>> g_entries;  // most recently used first
std::atomic<uint64_t> g_conversions{0};

size_t kept_bytes() {
  size_t b = 0;
  for (auto& e : g_entries) b += e->floats * sizeof(uint16_t);
  return b;
}

bool convert(const float* in, uint16_t* out, size_t n) {
  try {
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // as every oneDNN call here
    dnnl::engine& eng = onednn_engine();
    thread_local dnnl::stream stream(eng);
    const dnnl::memory::dims dims{static_cast<dnnl::memory::dim>(n)};
    dnnl::memory src({dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a}, eng, const_cast<float*>(in));
    dnnl::memory dst({dims, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::a}, eng, out);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

std::shared_ptr<const Bf16Mirror> bf16_mirror(const std::shared_ptr<Buffer>& source) {
  if (!source || !source->is_variable() || source->device().type != DeviceType::CPU) return nullptr;
  const size_t floats = source->size() / sizeof(float);
  if (static_cast<int64_t>(floats) < kMinMirroredFloats) return nullptr;
  const uint64_t writes = source->writes();
  std::shared_ptr<Entry> mine;
  {
    std::unique_lock<std::mutex> lock(g_mu);
    for (auto it = g_entries.begin(); it != g_entries.end();) {
      std::shared_ptr<Buffer> s = (*it)->source.lock();
      if (!s) {  // its buffer is gone
        it = g_entries.erase(it);
        continue;
      }
      if (s == source && (*it)->floats == floats) {
        std::shared_ptr<Entry> e = *it;
        if (e->writes == writes) {
          if (!g_ready.wait_for(lock, kWaitForOther, [&] { return e->ready || e->failed; }) || e->failed)
            return nullptr;
          for (auto j = g_entries.begin(); j != g_entries.end(); ++j)
            if (*j == e) {
              g_entries.splice(g_entries.begin(), g_entries, j);
              break;
            }
          return e;
        }
        it = g_entries.erase(it);  // written since: stale
        continue;
      }
      ++it;
    }
    mine = std::make_shared<Entry>();
    mine->source = source;
    mine->writes = writes;
    mine->floats = floats;
    g_entries.push_front(mine);
    while (g_entries.size() > kMaxMirrors || (g_entries.size() > 1 && kept_bytes() > kMaxBytes)) g_entries.pop_back();
  }
  // Converted outside the lock: other products go on meanwhile; one that wants this
  // mirror waits for it.
  bool ok = false;
  try {
    uint16_t* out = static_cast<uint16_t*>(mine->storage.get(floats * sizeof(uint16_t)));
    ok = convert(static_cast<const float*>(source->data()), out, floats);
    mine->halves = out;
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  g_conversions.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    (ok ? mine->ready : mine->failed) = true;
    if (!ok) g_entries.remove(mine);
  }
  g_ready.notify_all();
  return ok ? mine : nullptr;
}

size_t bf16_mirrors_kept() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_entries.size();
}

#else

std::shared_ptr<const Bf16Mirror> bf16_mirror(const std::shared_ptr<Buffer>&) { return nullptr; }
size_t bf16_mirrors_kept() { return 0; }

#endif

uint64_t bf16_mirror_conversions() {
#ifdef AF_HAVE_ONEDNN
  return g_conversions.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}

}  // namespace actorflow::cpu
