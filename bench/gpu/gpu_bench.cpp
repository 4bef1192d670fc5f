// GPU benchmarks for scripts/gpu-check, one program outside bench/run: that
// driver runs on machines without GPUs. Prints the harness's BENCH line format.
//
// gpu_matmul_4096[_tf32]: f32 [4096,4096] x [4096,4096] through our MatMul node's GPU
// kernel (each product a kernel firing, done once queued as in a step; 10 queued, then
// one wait) against cublasSgemm called directly on a stream of its own (10 calls, one
// wait), alternated, medians of 7.
// Goal: ours >= 90% of cuBLAS.
//
// gpu_bench step_overhead: see step_overhead_case (its BENCH line is printed by
// scripts/gpu-check, which has PyTorch's figure).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <actorflow/actorflow.h>
#include <actorflow/kernel.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace af = actorflow;

namespace {

using Clock = std::chrono::steady_clock;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}
template <class R>
auto must(R r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.status().to_string());
  return std::move(*r);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void matmul_case(int64_t n, bool tf32) {
  const std::string name = "gpu_matmul_" + std::to_string(n) + (tf32 ? "_tf32" : "");
  // Read when the kernel builds its cuBLASLt plan, i.e. at its first product.
  setenv("AF_GPU_ALLOW_TF32", tf32 ? "1" : "0", 1);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> ha(static_cast<size_t>(n * n)), hb(ha.size());
  for (float& x : ha) x = u(rng);
  for (float& x : hb) x = u(rng);
  af::Tensor a = must(af::copy_to_gpu(af::Tensor::from_vector(ha, {n, n}), 0), "copy a");
  af::Tensor b = must(af::copy_to_gpu(af::Tensor::from_vector(hb, {n, n}), 0), "copy b");

  af::Graph g;
  af::NodeSpec spec;
  spec.op = "MatMul";
  spec.inputs = {af::placeholder(g, af::f32, {n, n}, "a"), af::placeholder(g, af::f32, {n, n}, "b")};
  auto op = must(g.add_node(std::move(spec)), "MatMul node");
  const af::Node& node = op.node();
  auto kernel = must(af::KernelRegistry::global().create(node, af::DeviceType::GPU), "GPU MatMul kernel");
  af::DeviceContext* dev = must(af::gpu_device_context(0), "gpu:0");
  af::Tensor ours_out;
  auto ours = [&](int reps) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) {
      af::OpKernelContext ctx(node, {a, b}, dev, nullptr, i);
      af::Status s = af::run_kernel_blocking(*kernel, ctx);
      if (!s.ok()) throw std::runtime_error("our MatMul: " + s.to_string());
      ours_out = ctx.output(0);
    }
    // Our kernels are done once queued, as the peer's calls are: both wait at the end.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };

  cublasHandle_t h = nullptr;
  cudaStream_t stream = nullptr;
  float* c = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublas_check(cublasCreate(&h), "cublasCreate");
  cublas_check(cublasSetStream(h, stream), "cublasSetStream");
  cublas_check(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  cuda_check(cudaMalloc(&c, static_cast<size_t>(n * n) * sizeof(float)), "cudaMalloc");
  auto peer = [&](int reps) {
    const float alpha = 1.f, beta = 0.f;
    const auto t0 = Clock::now();
    // Row-major C = A B is column-major C^T = B^T A^T.
    for (int i = 0; i < reps; ++i)
      cublas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &alpha,
                               static_cast<const float*>(b.raw_data()), int(n), static_cast<const float*>(a.raw_data()),
                               int(n), &beta, c, int(n)),
                   "cublasSgemm");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };

  const int reps = 10;
  ours(2);
  peer(2);
  std::vector<double> o, p;
  for (int i = 0; i < 7; ++i) {
    o.push_back(ours(reps));
    p.push_back(peer(reps));
  }
  // The timings count only if both sides computed the same product.
  std::vector<float> hc(static_cast<size_t>(n * n));
  cuda_check(cudaMemcpy(hc.data(), c, hc.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy c");
  af::Tensor back = must(af::copy_to_host(ours_out), "copy ours");
  const float* ho = back.data<float>();
  double worst = 0;
  for (size_t i = 0; i < hc.size(); i += 4099) worst = std::max(worst, double(std::fabs(ho[i] - hc[i])));
  const double tol = tf32 ? 0.5 : 1e-2;
  const double flop = 2.0 * double(n) * double(n) * double(n) * reps;
  const double go = flop / median(o) / 1e9, gp = flop / median(p) / 1e9;
  if (worst > tol) {
    std::printf("BENCH %s ours=n/a peer=n/a ratio=n/a (results differ by %.3g > %.3g: timing void)\n", name.c_str(),
                worst, tol);
  } else {
    std::printf("BENCH %s ours=%.0fGFLOP/s peer=%.0fGFLOP/s ratio=%.3f (cuBLAS direct)\n", name.c_str(), go, gp,
                go / gp);
    std::printf("#   %s: goal ours >= 0.90 x cuBLAS: %s\n", name.c_str(), go >= 0.9 * gp ? "met" : "NOT met");
  }
  std::fflush(stdout);
  cudaFree(c);
  cublasDestroy(h);
  cudaStreamDestroy(stream);
}

// gpu_step_overhead: us per node firing on the GPU. A session runs a chain of Relu nodes
// under DeviceScope("/gpu:0") on a one-element tensor; the difference between a chain
// of 1 + kChain nodes and one of 1 node, over kChain, is the cost of one firing (actor
// message, launch), free of the feed's and fetch's copies. Run in a process
// of its own (gpu_bench step_overhead): the pool's peak must show that the chain ran on
// the GPU. The peer is PyTorch's eager launch overhead per op (bench/gpu/torch_peer.py).
void step_overhead_case() {
  constexpr int kChain = 200;
  auto step_seconds = [](int nodes, int reps) {
    af::Graph g;
    af::Output x, y;
    {
      af::DeviceScope gpu(g, "/gpu:0");
      x = af::placeholder(g, af::f32, {1}, "x");
      y = x;
      for (int i = 0; i < nodes; ++i) y = af::relu(y, "r" + std::to_string(i));
    }
    auto sess = must(af::Session::create(g), "session");
    af::Tensor in = af::Tensor::from_vector<float>({1.f}, af::Shape{1});
    for (int i = 0; i < 20; ++i) must(sess.run({y}, {{x, in}}), "warm-up step");
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < reps; ++i) must(sess.run({y}, {{x, in}}), "step");
      t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / reps);
    }
    return median(t);
  };
  const double one = step_seconds(1, 200);
  const double chain = step_seconds(1 + kChain, 50);
  auto stats = must(af::gpu_memory_stats(0), "gpu memory stats");
  if (stats.peak_bytes_in_use == 0) {
    std::printf("BENCH gpu_step_overhead SKIP (the chain did not run on the GPU: the pool saw no allocation)\n");
    return;
  }
  const double us = (chain - one) / kChain * 1e6;
  std::printf("OURS gpu_step_overhead us_per_node=%.3f step_1=%.1fus step_%d=%.1fus\n", us, one * 1e6, 1 + kChain,
              chain * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  if (af::cuda_device_count() == 0) {
    std::printf("GPU benchmarks skipped: no device\n");
    return 77;
  }
  if (argc > 1 && std::string(argv[1]) == "step_overhead") {
    try {
      step_overhead_case();
    } catch (const std::exception& e) {
      std::printf("BENCH gpu_step_overhead SKIP (the GPU run failed: %s)\n", e.what());
    }
    return 0;
  }
  std::printf("# gpu:0 = %s\n", af::cuda_device_name(0).c_str());
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  int failed = 0;
  for (bool tf32 : {false, true}) {
    try {
      matmul_case(n, tf32);
    } catch (const std::exception& e) {
      std::printf("BENCH gpu_matmul_%lld%s ours=n/a peer=n/a ratio=n/a (error: %s)\n", static_cast<long long>(n),
                  tf32 ? "_tf32" : "", e.what());
      failed = 1;
    }
  }
  return failed;
}
