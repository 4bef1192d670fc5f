#include "harness/bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

namespace bench {
namespace {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

// Case parameters as the Python peers read them: {"name": int or string, ...}.
nlohmann::json params_json(const Params& p) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [k, v] : p.ints) o[k] = v;
  for (const auto& [k, v] : p.strs) o[k] = v;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Enough digits to compare, not more than the noise.
std::string fmt(double v) {
  char buf[64];
  double a = std::abs(v);
  if (a >= 100) std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 10) std::snprintf(buf, sizeof buf, "%.2f", v);
  else if (a >= 0.1) std::snprintf(buf, sizeof buf, "%.3f", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

struct Options {
  bool quick = false;
  int pairs = 0;   // 0: the mode's default
  int warmup = -1; // -1: the case's default
  std::vector<std::string> only_peers;
  std::vector<std::string> cases;
};

// A case may set its own "pairs" / "warmup" in its params (e.g. peak_rss, whose samples
// are whole processes); the command line overrides them.
int case_param(const Case& c, const Options& o, const char* key, int otherwise) {
  Params p = c.params(o.quick);
  auto it = p.ints.find(key);
  return it == p.ints.end() ? otherwise : static_cast<int>(it->second);
}

int default_pairs(const Case& c, const Options& o) {
  if (o.pairs > 0) return o.pairs;
  int own = case_param(c, o, "pairs", 0);
  if (own > 0) return own;
  if (o.quick) return 5;
  return c.name.rfind("matmul_4096", 0) == 0 ? 5 : 11;
}

int default_warmup(const Case& c, const Options& o) {
  if (o.warmup >= 0) return o.warmup;
  int own = case_param(c, o, "warmup", -1);
  if (own >= 0) return own;
  return c.name.rfind("matmul_4096", 0) == 0 ? 1 : 2;
}

bool selected(const Case& c, const Options& o) {
  if (o.cases.empty()) return !(o.quick && c.skip_in_quick);
  return std::find(o.cases.begin(), o.cases.end(), c.name) != o.cases.end();
}

int run_standalone(const Options& o) {
  double ghz = 0;
  int cores = 0;
  double peak = peak_gflops(&ghz, &cores);
  std::printf("# alternating ours/peer, warm-up then %s pairs; medians. cores=%d clock=%.3fGHz peak=%.0fGFLOP/s\n",
              o.pairs > 0 ? std::to_string(o.pairs).c_str() : (o.quick ? "5" : "11 (matmul_4096: 5)"), cores, ghz,
              peak);
  const char* ob = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("# OPENBLAS_NUM_THREADS=%s BENCH_THREADS=%d\n", ob ? ob : "(unset)", threads());
  int failures = 0;
  for (const Case& c : registry()) {
    if (!selected(c, o)) continue;
    try {
      Params p = c.params(o.quick);
      Prepared prep = c.prepare(p);
      const Side& ours = prep.sides.at(0);
      std::printf("# %s: %s; ours: %s\n", c.name.c_str(), c.work.c_str(), ours.threads.c_str());
      if (!c.note.empty()) std::printf("#   note: %s\n", c.note.c_str());
      int peers = 0;
      for (size_t i = 1; i < prep.sides.size(); ++i) {
        const Side& peer = prep.sides[i];
        if (!o.only_peers.empty() &&
            std::find(o.only_peers.begin(), o.only_peers.end(), peer.name) == o.only_peers.end())
          continue;
        ++peers;
        for (int w = 0; w < default_warmup(c, o); ++w) {
          ours.sample();
          peer.sample();
        }
        std::vector<double> a, b;
        for (int k = 0; k < default_pairs(c, o); ++k) {
          a.push_back(ours.sample());
          b.push_back(peer.sample());
        }
        double ma = median(a), mb = median(b);
        std::printf("BENCH %s ours=%s%s peer=%s%s ratio=%s (%s)\n", c.name.c_str(), fmt(ma).c_str(),
                    c.unit.c_str(), fmt(mb).c_str(), c.unit.c_str(), fmt(ma / mb).c_str(), peer.name.c_str());
        std::printf("#   %s: %s\n", peer.name.c_str(), peer.threads.c_str());
        if (c.unit == "GFLOP/s" && peak > 0)
          std::printf("#   %s of peak: ours=%.0f%% peer=%.0f%%\n", c.name.c_str(), 100 * ma / peak, 100 * mb / peak);
        std::fflush(stdout);
      }
      if (peers == 0) {
        for (int w = 0; w < default_warmup(c, o); ++w) ours.sample();
        std::vector<double> a;
        for (int k = 0; k < default_pairs(c, o); ++k) a.push_back(ours.sample());
        std::printf("BENCH %s ours=%s%s peer=n/a ratio=n/a (no peer in this program)\n", c.name.c_str(),
                    fmt(median(a)).c_str(), c.unit.c_str());
      }
    } catch (const std::exception& e) {
      ++failures;
      std::printf("FAIL %s: %s\n", c.name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  return failures ? 1 : 0;
}

// One JSON object per line on stdout; requests are whitespace-separated words on stdin.
int run_serve() {
  std::unique_ptr<Prepared> prep;
  std::string line;
  // Error texts may hold any bytes; JSON needs UTF-8, so invalid bytes become U+FFFD.
  auto reply = [](const nlohmann::json& j) {
    std::fputs(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "list") {
        int quick = 0;
        in >> quick;
        nlohmann::json cases = nlohmann::json::array();
        for (const Case& c : registry())
          cases.push_back({{"name", c.name},
                           {"unit", c.unit},
                           {"higher_is_better", c.higher_is_better},
                           {"work", c.work},
                           {"note", c.note},
                           {"skip_in_quick", c.skip_in_quick},
                           {"internal", c.internal},
                           {"params", params_json(c.params(quick != 0))}});
        reply({{"ok", true}, {"cases", std::move(cases)}});
      } else if (cmd == "prepare") {
        std::string name;
        int quick = 0;
        in >> name >> quick;
        prep.reset();
        auto it = std::find_if(registry().begin(), registry().end(), [&](const Case& c) { return c.name == name; });
        if (it == registry().end()) throw std::runtime_error("unknown case " + name);
        prep = std::make_unique<Prepared>(it->prepare(it->params(quick != 0)));
        nlohmann::json sides = nlohmann::json::array();
        for (const Side& side : prep->sides) sides.push_back({{"name", side.name}, {"threads", side.threads}});
        reply({{"ok", true}, {"sides", std::move(sides)}});
      } else if (cmd == "sample") {
        std::string side;
        in >> side;
        if (!prep) throw std::runtime_error("sample before prepare");
        auto it = std::find_if(prep->sides.begin(), prep->sides.end(), [&](const Side& s) { return s.name == side; });
        if (it == prep->sides.end()) throw std::runtime_error("unknown side " + side);
        reply({{"ok", true}, {"value", it->sample()}});
      } else if (cmd == "release") {
        prep.reset();
        reply({{"ok", true}});
      } else if (cmd == "quit") {
        reply({{"ok", true}});
        return 0;
      } else if (!cmd.empty()) {
        throw std::runtime_error("unknown command " + cmd);
      }
    } catch (const std::exception& e) {
      reply({{"ok", false}, {"error", e.what()}});
    }
  }
  return 0;
}

void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--pairs N] [--warmup N] [--peers a,b] [--list] [--serve] [CASE...]\n"
               "  runs ours and this program's in-process peers alternately; bench/run adds the Python peers\n",
               prog);
}

}  // namespace

int add(Case c) {
  registry().push_back(std::move(c));
  return static_cast<int>(registry().size());
}

int threads() {
  const char* e = std::getenv("BENCH_THREADS");
  int n = e ? std::atoi(e) : 0;
  return n > 0 ? n : 2;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("wrong result: " + what);
}

double peak_gflops(double* ghz_out, int* cores_out) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  double mhz = 0;
  while (std::getline(f, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) mhz = std::atof(line.c_str() + colon + 1);
      break;
    }
  }
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (ghz_out) *ghz_out = mhz / 1000;
  if (cores_out) *cores_out = cores;
  return cores * 32.0 * mhz / 1000;
}

int main(int argc, char** argv) {
  Options o;
  bool list = false, serve = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(argv[0]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--serve") serve = true;
    else if (a == "--list") list = true;
    else if (a == "--pairs") o.pairs = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (a == "--peers") {
      std::stringstream ss(next());
      std::string p;
      while (std::getline(ss, p, ',')) o.only_peers.push_back(p);
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      usage(argv[0]);
      return 2;
    } else {
      o.cases.push_back(a);
    }
  }
  if (serve) return run_serve();
  if (list) {
    for (const Case& c : registry())
      std::printf("%-18s %-8s %s%s\n", c.name.c_str(), c.unit.c_str(), c.work.c_str(),
                  c.skip_in_quick ? " [not in --quick]" : "");
    return 0;
  }
  for (const std::string& name : o.cases) {
    if (std::none_of(registry().begin(), registry().end(), [&](const Case& c) { return c.name == name; })) {
      std::fprintf(stderr, "unknown case '%s' (try --list)\n", name.c_str());
      return 2;
    }
  }
  return run_standalone(o);
}

}  // namespace bench
