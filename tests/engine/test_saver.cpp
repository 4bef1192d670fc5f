// Checkpoints: af::Saver round trips, keep-last-N, every error case, crash safety (a
// child process SIGKILLed mid-save), and interop with Python's safetensors. The file
// format's own checks (damaged files, strict JSON) are in test_safetensors_format.cpp.
#include "saver_test_util.h"

TEST_CASE("Saver round-trips variables of every dtype and shape into a fresh session") {
  TempDir dir;
  Values v;
  std::string path = save_model(dir.str(), 7);
  CHECK(path == dir / "model.ckpt-7.safetensors");
  CHECK(fs::exists(path));
  auto latest = af::latest_checkpoint(dir.str());
  REQUIRE(latest.ok());
  CHECK(*latest == path);

  SUBCASE("same graph shape, new session after run_init") {
    Model m;
    af::Saver saver(m.g);
    auto sess = af::Session::create(m.g).value();
    REQUIRE(sess.run_init().ok());
    CHECK_FALSE(eval_var(sess, m.step).equals(v.step));
    auto s = saver.restore(sess, dir.str());
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    check_values(sess, m, v);
  }
  SUBCASE("restore initializes variables without run_init") {
    Model m;
    af::Saver saver(m.g);
    auto sess = af::Session::create(m.g).value();
    auto s = saver.restore_file(sess, path);
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    check_values(sess, m, v);
  }
  SUBCASE("the file holds every variable, the step and checksums") {
    std::map<std::string, std::string> meta;
    auto tensors = af::read_safetensors(path, &meta);
    REQUIRE(tensors.ok());
    std::set<std::string> names;
    for (const auto& t : *tensors) names.insert(t.name);
    CHECK(names == std::set<std::string>{"dense/kernel", "scale", "ids", "counts", "pixels", "flags", "empty", "global_step"});
    CHECK(meta["step"] == "7");
    CHECK(meta.count("crc32c.data") == 1);
    CHECK(meta.count("crc32c.header") == 1);
    CHECK(meta.count("crc32c:dense/kernel") == 1);
    // The real format: an 8-byte length, a JSON header padded to keep the data aligned.
    std::string bytes = read_file(path);
    uint64_t n = header_len(bytes);
    CHECK((8 + n) % 8 == 0);
    CHECK(bytes[8] == '{');
    CHECK(contains(bytes.substr(8, n), "\"dense/kernel\":{\"dtype\":\"F32\",\"shape\":[2,3]"));
    CHECK(contains(bytes.substr(8, n), "\"dtype\":\"BOOL\""));
  }
}

TEST_CASE("Saver: var_list subsets, training state across sessions, ignored extra tensors") {
  TempDir dir;
  Model m;
  af::Saver only_w(m.g, {m.w, m.step});
  CHECK(only_w.var_list().size() == 2);
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  Values v;
  store(sess, m, v);
  REQUIRE(only_w.save(sess, dir.str(), 1).ok());
  auto tensors = af::read_safetensors(dir / "model.ckpt-1.safetensors");
  REQUIRE(tensors.ok());
  CHECK(tensors->size() == 2);

  // The full model saved by another Saver restores into a Saver over a subset.
  TempDir full;
  af::Saver all(m.g);
  REQUIRE(all.save(sess, full.str(), 5).ok());
  set_var(sess, m.w, af::Tensor::filled(af::f32, {2, 3}, 9));
  set_var(sess, m.d, af::Tensor::scalar<double>(9));
  REQUIRE(only_w.restore(sess, full.str()).ok());
  CHECK(eval_var(sess, m.w).equals(v.w));
  CHECK(eval_var(sess, m.d).item<double>() == 9);  // not in the subset: untouched

  // A training-like update after restore continues from the restored value.
  auto inc = af::assign_add(m.step, af::constant(m.g, int64_t{1}));
  REQUIRE(sess.run({}, {}, {af::Operation(inc)}).ok());
  CHECK(eval_var(sess, m.step).item<int64_t>() == 1235);
}

TEST_CASE("Saver's restore ops sit on their variable's device") {
  TempDir dir;
  af::Graph g;
  af::Output placed;
  {
    af::DeviceScope d(g, "/cpu:0");
    placed = af::variable(g, {2}, af::constant_initializer(3), "placed");
  }
  auto free = af::variable(g, {2}, af::constant_initializer(4), "free");
  af::Saver saver(g);
  int checked = 0;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const af::Node& n = g.node(id);
    if (n.op != "Assign" || n.name.rfind("save/", 0) != 0) continue;
    CHECK(n.device == (n.attr_string("variable") == "placed" ? "/cpu:0" : ""));
    ++checked;
  }
  CHECK(checked == 2);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(saver.save(sess, dir.str(), 1).ok());
  set_var(sess, placed, af::Tensor::filled(af::f32, {2}, 0));
  REQUIRE(saver.restore(sess, dir.str()).ok());
  CHECK(eval_var(sess, placed).to_vector<float>() == std::vector<float>{3, 3});
  CHECK(eval_var(sess, free).to_vector<float>() == std::vector<float>{4, 4});
}

TEST_CASE("Saver keeps the last max_to_keep checkpoints, also across Saver instances") {
  TempDir dir;
  Model m;
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  {
    af::Saver saver(m.g, {}, 3);
    // A temp file a killed save left behind is cleaned up by the next save, and so is a
    // whole checkpoint that was renamed into place but never named by the index.
    write_file(dir / "model.ckpt-99.safetensors.tmp", "partial");
    write_file(dir / "model.ckpt-5.safetensors", "whole but unindexed");
    for (int64_t step = 10; step <= 60; step += 10) {
      set_var(sess, m.step, af::Tensor::scalar<int64_t>(step));
      REQUIRE(saver.save(sess, dir.str(), step).ok());
    }
    CHECK_FALSE(fs::exists(dir / "model.ckpt-99.safetensors.tmp"));
    CHECK_FALSE(fs::exists(dir / "model.ckpt-5.safetensors"));
    CHECK_FALSE(fs::exists(dir / "checkpoint.tmp"));
  }
  for (int step : {10, 20, 30}) CHECK_FALSE(fs::exists(dir / ("model.ckpt-" + std::to_string(step) + ".safetensors")));
  for (int step : {40, 50, 60}) CHECK(fs::exists(dir / ("model.ckpt-" + std::to_string(step) + ".safetensors")));
  auto state = af::read_checkpoint_state(dir.str());
  REQUIRE(state.ok());
  CHECK(state->latest == "model.ckpt-60.safetensors");
  CHECK(state->all == std::vector<std::string>{"model.ckpt-40.safetensors", "model.ckpt-50.safetensors", "model.ckpt-60.safetensors"});

  // A new Saver (a restarted process) continues the list rather than forgetting it.
  af::Saver again(m.g, {}, 3);
  REQUIRE(again.save(sess, dir.str(), 70).ok());
  CHECK_FALSE(fs::exists(dir / "model.ckpt-40.safetensors"));
  state = af::read_checkpoint_state(dir.str());
  REQUIRE(state.ok());
  CHECK(state->all.size() == 3);
  CHECK(state->latest == "model.ckpt-70.safetensors");
  // Saving a step again replaces it and makes it the latest.
  REQUIRE(again.save(sess, dir.str(), 50).ok());
  state = af::read_checkpoint_state(dir.str());
  CHECK(state->all == std::vector<std::string>{"model.ckpt-60.safetensors", "model.ckpt-70.safetensors", "model.ckpt-50.safetensors"});

  // Restoring the latest gives step 60's values (what the variable held when step 50 was re-saved is 60).
  set_var(sess, m.step, af::Tensor::scalar<int64_t>(-1));
  REQUIRE(again.restore(sess, dir.str()).ok());
  CHECK(eval_var(sess, m.step).item<int64_t>() == 60);

  // max_to_keep = 0 keeps everything.
  TempDir all;
  af::Saver keep_all(m.g, {}, 0);
  for (int64_t step = 1; step <= 7; ++step) REQUIRE(keep_all.save(sess, all.str(), step).ok());
  CHECK(af::read_checkpoint_state(all.str())->all.size() == 7);
  for (int64_t step = 1; step <= 7; ++step) CHECK(fs::exists(all / ("model.ckpt-" + std::to_string(step) + ".safetensors")));
}

TEST_CASE("Saver construction and session errors") {
  Model m;
  auto sum = af::add(m.w, m.w);
  CHECK_THROWS_WITH_AS(af::Saver(m.g, {sum}), doctest::Contains("not a variable"), af::Error);
  CHECK_THROWS_WITH_AS(af::Saver(m.g, {}, -1), doctest::Contains("max_to_keep"), af::Error);
  af::Graph sg;
  af::variable(sg, af::Tensor::from_vector<std::string>({"a", "b"}), "names");
  CHECK_THROWS_WITH_AS(af::Saver{sg}, doctest::Contains("'names' has dtype string"), af::Error);

  TempDir dir;
  af::Saver saver(m.g);
  Model other;
  auto other_sess = af::Session::create(other.g).value();
  REQUIRE(other_sess.run_init().ok());
  auto s = saver.save(other_sess, dir.str(), 1);
  CHECK(s.code() == af::Code::invalid_argument);
  CHECK(contains(s.message(), "another graph"));

  // Saving uninitialized variables fails and names one; nothing is written.
  auto fresh = af::Session::create(m.g).value();
  s = saver.save(fresh, dir.str(), 1);
  CHECK_FALSE(s.ok());
  CHECK(contains(s.message(), "Saver::save"));
  CHECK(contains(s.message(), "initialized"));
  CHECK_FALSE(fs::exists(dir / "checkpoint"));
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  CHECK(saver.save(sess, dir.str(), -5).code() == af::Code::invalid_argument);
}

TEST_CASE("Saver::restore errors name the file and the variable, and change nothing") {
  TempDir dir;
  const std::string path = save_model(dir.str(), 3);
  const std::string original = read_file(path);
  const uint64_t n = header_len(original);

  // The model that restores, with values that must survive a failed restore.
  Model m;
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  set_var(sess, m.step, af::Tensor::scalar<int64_t>(-7));
  af::Saver saver(m.g);
  auto untouched = [&] { CHECK(eval_var(sess, m.step).item<int64_t>() == -7); };

  SUBCASE("no checkpoint at all") {
    TempDir empty;
    auto s = saver.restore(sess, empty.str());
    CHECK(s.code() == af::Code::not_found);
    CHECK(contains(s.message(), empty.str()));
    CHECK(contains(s.message(), "no checkpoint"));
    s = saver.restore_file(sess, dir / "model.ckpt-404.safetensors");
    CHECK(s.code() == af::Code::not_found);
    CHECK(contains(s.message(), "model.ckpt-404.safetensors"));
    CHECK(af::latest_checkpoint(empty.str()).status().code() == af::Code::not_found);
  }
  SUBCASE("index names a file that is gone") {
    fs::remove(path);
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::not_found);
    CHECK(contains(s.message(), "model.ckpt-3.safetensors"));
  }
  SUBCASE("corrupted index") {
    write_file(dir / "checkpoint", "{\"latest\": ");
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::data_loss);
    CHECK(contains(s.message(), dir / "checkpoint"));
    write_file(dir / "checkpoint", "{\"latest\": \"../../etc/passwd\", \"all\": []}");
    CHECK(saver.restore(sess, dir.str()).code() == af::Code::data_loss);
  }
  SUBCASE("a variable the checkpoint lacks") {
    Model bigger;
    af::variable(bigger.g, af::zeros(bigger.g, {2}), "dense/extra");
    af::Saver s2(bigger.g);
    auto sess2 = af::Session::create(bigger.g).value();
    auto s = s2.restore(sess2, dir.str());
    CHECK(s.code() == af::Code::not_found);
    CHECK(contains(s.message(), "'dense/extra'"));
    CHECK(contains(s.message(), path));
  }
  SUBCASE("shape mismatch") {
    af::Graph g;
    af::variable(g, af::zeros(g, {3, 2}), "dense/kernel");
    af::Saver s2(g);
    auto sess2 = af::Session::create(g).value();
    auto s = s2.restore(sess2, dir.str());
    CHECK(s.code() == af::Code::invalid_argument);
    CHECK(contains(s.message(), "'dense/kernel'"));
    CHECK(contains(s.message(), "[3,2]"));
    CHECK(contains(s.message(), "[2,3]"));
    CHECK(contains(s.message(), path));
  }
  SUBCASE("dtype mismatch") {
    af::Graph g;
    af::variable(g, af::zeros(g, {2, 3}, af::f64), "dense/kernel");
    af::Saver s2(g);
    auto sess2 = af::Session::create(g).value();
    auto s = s2.restore(sess2, dir.str());
    CHECK(s.code() == af::Code::invalid_argument);
    CHECK(contains(s.message(), "'dense/kernel' is float64"));
    CHECK(contains(s.message(), "F32"));
  }
  SUBCASE("a flipped bit in a tensor's data") {
    auto entries = af::read_safetensors(path);
    REQUIRE(entries.ok());
    std::string bad = original;
    bad[bad.size() - 1] ^= 0x10;  // the last byte belongs to the last tensor in the file
    write_file(path, bad);
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::data_loss);
    CHECK(contains(s.message(), path));
    CHECK(contains(s.message(), "CRC-32C"));
    CHECK(contains(s.message(), "tensor '"));
    untouched();
  }
  SUBCASE("a changed header") {
    std::string bad = original;
    size_t at = bad.find("\"scale\"");
    REQUIRE(at < 8 + n);
    bad[at + 1] = 'S';  // renames the tensor: structurally valid, but the header CRC disagrees
    write_file(path, bad);
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::data_loss);
    CHECK(contains(s.message(), "header fails the CRC-32C check"));
    untouched();
  }
  SUBCASE("a header that is not JSON") {
    std::string bad = original;
    bad[8 + n / 2] = '\x01';
    write_file(path, bad);
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::data_loss);
    CHECK(contains(s.message(), path));
    untouched();
  }
  SUBCASE("truncated files") {
    for (size_t keep : {size_t{0}, size_t{5}, size_t{8 + n / 2}, size_t{8 + n + 3}, original.size() - 1}) {
      CAPTURE(keep);
      write_file(path, original.substr(0, keep));
      auto s = saver.restore(sess, dir.str());
      CHECK(s.code() == af::Code::data_loss);
      CHECK(contains(s.message(), path));
      CHECK(contains(s.message(), "truncated"));
    }
    untouched();
  }
  SUBCASE("bytes appended") {
    write_file(path, original + "xyz");
    auto s = saver.restore(sess, dir.str());
    CHECK(s.code() == af::Code::data_loss);
    CHECK(contains(s.message(), "3 bytes follow the last tensor"));
  }
}

TEST_CASE("a save killed at any moment leaves a complete checkpoint to restore") {
  TempDir dir;
  const int64_t kA = int64_t{1} << 20, kB = int64_t{1} << 19;
  af::Graph g;
  auto a = af::variable(g, af::zeros(g, {kA}), "big/a");
  auto b = af::variable(g, af::zeros(g, {kB}, af::f64), "big/b");
  auto gs = af::variable(g, af::zeros(g, {}, af::i64), "global_step", false);
  af::Saver saver(g, {}, 3);
  std::vector<af::NamedTensor> tensors = {
      {"big/a", af::Tensor(af::f32, {kA})}, {"big/b", af::Tensor(af::f64, {kB})}, {"global_step", af::Tensor(af::i64, {})}};

  std::mt19937 rng(20240611);
  int64_t next_step = 1;
  double save_ms = 50;
  int kills_mid_save = 0;
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      // Bounded, in case the parent fails a check before it kills us.
      for (int64_t step = next_step; step < next_step + 500; ++step) {
        std::fill_n(tensors[0].value.data<float>(), kA, static_cast<float>(step));
        std::fill_n(tensors[1].value.data<double>(), kB, static_cast<double>(-step));
        tensors[2].value.data<int64_t>()[0] = step;
        if (!af::write_checkpoint(dir.str(), step, tensors, 3).ok()) ::_exit(2);
        char c = 1;
        if (::write(fds[1], &c, 1) != 1) ::_exit(3);
      }
      ::_exit(4);
    }
    ChildGuard guard{pid};
    ::close(fds[1]);
    char c;
    REQUIRE(::read(fds[0], &c, 1) == 1);  // the first save of this round is complete
    if (round == 0) save_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::uniform_real_distribution<double> delay(0, 2.5 * save_ms);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(round == 1 ? 0.0 : delay(rng)));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    guard.pid = -1;
    CHECK(WIFSIGNALED(status));
    int completed = 1;
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    while (::read(fds[0], &c, 1) == 1) ++completed;
    ::close(fds[0]);
    for (const auto& e : fs::directory_iterator(dir.path))
      if (e.path().extension() == ".tmp") ++kills_mid_save;

    // The latest checkpoint restores, and it is one whole save: every value is its step.
    auto latest = af::latest_checkpoint(dir.str());
    REQUIRE_MESSAGE(latest.ok(), latest.status().to_string());
    auto sess = af::Session::create(g).value();
    auto s = saver.restore(sess, dir.str());
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    const int64_t step = eval_var(sess, gs).item<int64_t>();
    CHECK(*latest == dir / ("model.ckpt-" + std::to_string(step) + ".safetensors"));
    CHECK(step >= next_step + completed - 1);
    CHECK(step <= next_step + completed);  // the save being killed may have got its index in
    auto av = eval_var(sess, a), bv = eval_var(sess, b);
    CHECK(std::all_of(av.data<float>(), av.data<float>() + kA, [&](float x) { return x == static_cast<float>(step); }));
    CHECK(std::all_of(bv.data<double>(), bv.data<double>() + kB, [&](double x) { return x == static_cast<double>(-step); }));
    // Every checkpoint the index keeps is whole too.
    auto state = af::read_checkpoint_state(dir.str());
    REQUIRE(state.ok());
    CHECK(state->all.size() <= 3);
    for (const std::string& name : state->all) {
      auto t = af::read_safetensors(dir / name);
      REQUIRE_MESSAGE(t.ok(), t.status().to_string());
    }
    next_step = step + 1;
  }
  MESSAGE("kill test: one save took ~" << save_ms << " ms; " << kills_mid_save << " of 6 kills left a partial temp file");
}

TEST_CASE("needs safetensors: Python's safetensors reads our checkpoints and we restore its files") {
  std::string why;
  std::string python = interop::python_with({"numpy", "safetensors"}, &why);
  if (python.empty()) aft::skip("safetensors interop skipped: " + why);
  TempDir dir;
  const std::string path = save_model(dir.str(), 11);
  Values v;
  // What the file must hold, as JSON for the script; floats printed to round-trip.
  auto values_json = [](const af::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      char buf[40];
      if (t.dtype() == af::i64) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(t.data<int64_t>()[i]));
      else if (t.dtype() == af::boolean) std::snprintf(buf, sizeof buf, "%s", t.data<bool>()[i] ? "true" : "false");
      else std::snprintf(buf, sizeof buf, "%.17g", t.element_as_double(i));
      s += (i ? "," : "") + std::string(buf);
    }
    return s + "]";
  };
  auto entry = [&](const std::string& name, const char* np_dtype, const af::Tensor& t) {
    std::string shape = "[";
    for (int i = 0; i < t.rank(); ++i) shape += (i ? "," : "") + std::to_string(t.dim(i));
    return "\"" + name + "\": {\"dtype\": \"" + np_dtype + "\", \"shape\": " + shape + "], \"values\": " + values_json(t) + "}";
  };
  std::string expected = "{" + entry("dense/kernel", "float32", v.w) + "," + entry("scale", "float64", v.d) + "," +
                         entry("ids", "int32", v.i32v) + "," + entry("counts", "int64", v.i64v) + "," +
                         entry("pixels", "uint8", v.u8v) + "," + entry("flags", "bool", v.flags) + "," +
                         entry("empty", "float32", af::Tensor(af::f32, {0, 3})) + "," + entry("global_step", "int64", v.step) + "}";
  write_file(dir / "expected.json", expected);
  std::string out;
  int rc = interop::run_script(python, "check_safetensors.py", {path, dir / "expected.json"}, &out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "OK: 8 tensors match"));

  // The other way: a file from Python's writer (no checksums) restores into variables.
  const std::string py_path = dir / "from_python.safetensors";
  rc = interop::run_script(python, "write_safetensors.py", {py_path}, &out);
  REQUIRE_MESSAGE(rc == 0, out);
  af::Graph g;
  auto k = af::variable(g, af::zeros(g, {2, 3}), "dense/kernel");
  auto bias = af::variable(g, af::zeros(g, {3}, af::f64), "dense/bias");
  auto counts = af::variable(g, af::zeros(g, {2, 2}, af::i64), "counts");
  auto ids = af::variable(g, af::zeros(g, {4}, af::i32), "ids");
  auto pixels = af::variable(g, af::zeros(g, {3}, af::u8), "pixels");
  auto mask = af::variable(g, af::zeros(g, {3}, af::boolean), "mask");
  auto gstep = af::variable(g, af::zeros(g, {}, af::i64), "global_step", false);
  af::Saver saver(g);
  auto sess = af::Session::create(g).value();
  auto s = saver.restore_file(sess, py_path);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  CHECK(eval_var(sess, k).to_vector<float>() == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f});
  CHECK(eval_var(sess, bias).to_vector<double>() == std::vector<double>{-1.25, 2.5, 1e-30});
  CHECK(eval_var(sess, counts).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, int64_t{1} << 40});
  CHECK(eval_var(sess, ids).to_vector<int32_t>() == std::vector<int32_t>{7, -8, 9, 2147483647});
  CHECK(eval_var(sess, pixels).to_vector<uint8_t>() == std::vector<uint8_t>{0, 127, 255});
  CHECK(eval_var(sess, mask).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(eval_var(sess, gstep).item<int64_t>() == 42);
  std::map<std::string, std::string> meta;
  REQUIRE(af::read_safetensors(py_path, &meta).ok());
  CHECK(meta["written_by"] == "python safetensors");
}
