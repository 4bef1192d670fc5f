// CpuDevice::parallel_for: the caller takes blocks beside the pool's threads. Every index
// is covered exactly once, a body's exception reaches the caller, calls nest and run side
// by side without a deadlock.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "actorflow/ops/cpu_device.h"

namespace af = actorflow;

namespace {

// How many times each index of [0, n) was handed to the body.
std::vector<int> coverage(const af::CpuDevice& d, int64_t n, int64_t cost) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  d.parallel_for(n, cost, [&](int64_t b, int64_t e) {
    REQUIRE(0 <= b);
    REQUIRE(b < e);
    REQUIRE(e <= n);
    for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& s : seen) out.push_back(s.load());
  return out;
}

}  // namespace

TEST_CASE("parallel_for covers every index once, inline or sharded, whatever the sizes") {
  af::CpuDevice d(4);
  for (int64_t n : {1, 2, 3, 7, 100, 1000, 4097, 100003}) {
    for (int64_t cost : {1, 10, 1000, 100000}) {
      INFO("n " << n << ", cost " << cost);
      auto seen = coverage(d, n, cost);
      int64_t wrong = 0;
      for (int s : seen) wrong += s != 1;
      CHECK(wrong == 0);
    }
  }
  CHECK(coverage(d, 0, 1000).empty());
}

TEST_CASE("parallel_for shards large work over more than one thread") {
  af::CpuDevice d(2);
  if (d.num_threads() < 2) {
    MESSAGE("one thread in this process's pool (AF_NUM_THREADS=1?): nothing to shard");
    return;
  }
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::atomic<int> inside{0}, most{0};
  d.parallel_for(64, 1000000, [&](int64_t, int64_t) {
    int now = inside.fetch_add(1) + 1;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.push_back(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    inside.fetch_sub(1);
  });
  // The caller works too: it ran blocks of its own.
  bool caller = false;
  for (auto& id : ids) caller = caller || id == std::this_thread::get_id();
  CHECK(caller);
  CHECK(most.load() >= 2);
  CHECK(most.load() <= d.num_threads());
}

TEST_CASE("parallel_for rethrows a body's exception on the caller, after every block has run") {
  af::CpuDevice d(4);
  std::atomic<int64_t> covered{0};
  auto run = [&] {
    d.parallel_for(1000, 100000, [&](int64_t b, int64_t e) {
      covered.fetch_add(e - b);
      if (b == 0) throw std::runtime_error("block 0 failed");
    });
  };
  CHECK_THROWS_WITH_AS(run(), "block 0 failed", std::runtime_error);
  CHECK(covered.load() == 1000);
}

TEST_CASE("parallel_for nests inside its own body and runs from many threads at once") {
  af::CpuDevice d(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r)
        d.parallel_for(8, 100000, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            d.parallel_for(100, 1000, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
        });
    });
  for (auto& c : callers) c.join();
  CHECK(total.load() == int64_t{4} * 20 * 8 * 100);
}
