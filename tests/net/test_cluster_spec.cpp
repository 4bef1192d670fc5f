// ClusterSpec from every source a launcher may use: the seeds' flags, JSON files,
// Kubeflow's TF_CONFIG, Slurm's compressed node lists, Open MPI's ranks; and the errors
// bad specs give, which must name the variable, the field and the value.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <actorflow/net/cluster_sources.h>
#include <actorflow/net/cluster_spec.h>
#include <actorflow/net/hostlist.h>

namespace af = actorflow;
namespace net = actorflow::net;

namespace {

std::vector<std::string> addresses(const net::ClusterSpec& spec, const std::string& job) {
  std::vector<std::string> out;
  auto it = spec.jobs().find(job);
  if (it != spec.jobs().end())
    for (const net::HostPort& hp : it->second) out.push_back(hp.to_string());
  return out;
}

// The message of a result that must be an error.
template <typename T>
std::string error_of(const af::Result<T>& r) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::invalid_argument);
  return r.status().message();
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("task names and addresses") {
  CHECK(net::TaskName{"ps", 1}.to_string() == "/job:ps/task:1");
  auto t = net::TaskName::parse("/job:worker/replica:0/task:12");
  REQUIRE(t.ok());
  CHECK(*t == net::TaskName{"worker", 12});
  CHECK(net::TaskName::parse(net::TaskName{"chief", 0}.to_string()).value() == net::TaskName{"chief", 0});
  for (const char* bad : {"", "/job:/task:0", "/job:ps", "/job:ps/task:", "/job:ps/task:-1", "/job:ps/task:1x", "job:ps/task:1"})
    CHECK_FALSE(net::TaskName::parse(bad).ok());

  auto hp = net::HostPort::parse("node01");
  REQUIRE(hp.ok());
  CHECK(hp->to_string() == "node01:2222");
  CHECK(net::HostPort::parse("127.0.0.2:0")->port == 0);  // port 0: the daemon picks one
  CHECK(net::HostPort::parse("[::1]")->to_string() == "[::1]:2222");
  CHECK(net::HostPort::parse("[::1]:9000")->host == "::1");
  CHECK(net::HostPort::parse("h", 3000)->port == 3000);
  CHECK(error_of(net::HostPort::parse("h:99999")) == "'h:99999' has port '99999', not a number from 0 to 65535");
  CHECK(error_of(net::HostPort::parse("fe80::1:2222")) == "'fe80::1:2222' looks like an IPv6 address: write it as [ADDRESS]:PORT");
  CHECK(error_of(net::HostPort::parse(":2222")) == "':2222' has no valid host name");
  CHECK(error_of(net::HostPort::parse("a b:1")) == "'a b:1' has no valid host name");
  CHECK(error_of(net::HostPort::parse("[::1")) == "'[::1' has a '[' without a ']'");
}

TEST_CASE("the seeds' flags") {
  net::ClusterFlags f;
  f.ps_hosts = "ps0:2222,ps1:2223";
  f.worker_hosts = "w0:2222,w1,w2:3000";
  f.job_name = "worker";
  f.task_index = "2";
  auto spec = net::parse_cluster_flags(f);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(addresses(*spec, "ps") == Strings{"ps0:2222", "ps1:2223"});
  CHECK(addresses(*spec, "worker") == Strings{"w0:2222", "w1:2222", "w2:3000"});
  CHECK(spec->self() == net::TaskName{"worker", 2});
  CHECK(spec->self_address()->to_string() == "w2:3000");
  CHECK(spec->address({"ps", 1})->to_string() == "ps1:2223");
  CHECK(spec->address({"ps", 2}).status().code() == af::Code::not_found);
  CHECK(spec->chief().value() == net::TaskName{"worker", 0});
  CHECK_FALSE(spec->is_chief());
  CHECK(spec->num_tasks("ps") == 2);
  CHECK(spec->num_tasks("chief") == 0);
  CHECK(spec->tasks().size() == 5);
  CHECK(spec->tasks().front() == net::TaskName{"ps", 0});

  f.job_name = "ps";
  f.task_index = "1";
  CHECK(net::parse_cluster_flags(f)->self_address()->to_string() == "ps1:2223");

  SUBCASE("a chief job is the chief") {
    f.chief_hosts = "boss:2222";
    f.job_name = "chief";
    f.task_index = "0";
    auto with_chief = net::parse_cluster_flags(f);
    REQUIRE(with_chief.ok());
    CHECK(with_chief->chief().value() == net::TaskName{"chief", 0});
    CHECK(with_chief->is_chief());
  }
  SUBCASE("bad flags") {
    f.task_index = "2";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: --task_index 2 is out of range for job 'ps' (2 tasks)");
    f.task_index = "x";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: --task_index 'x' is not a task number");
    f.task_index = "0";
    f.job_name = "workers";
    CHECK(error_of(net::parse_cluster_flags(f)) ==
          "flags: --job_name 'workers' is not one of chief, master, worker, ps, evaluator");
    f.job_name = "";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: --job_name is missing: which job is this task?");
    f.job_name = "chief";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: --job_name 'chief' is not a job of the cluster (it has ps, worker)");
    f.job_name = "ps";
    f.worker_hosts = "w0:2222,,w2";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: --worker_hosts entry 1 '' has no valid host name");
    f.worker_hosts = "ps0:2222";
    CHECK(error_of(net::parse_cluster_flags(f)) == "flags: /job:ps/task:0 and /job:worker/task:0 share the address ps0:2222");
  }
}

// Exactly what Kubeflow's TFJob controller writes (it leaves the evaluator out of
// "cluster" on purpose).
TEST_CASE("TF_CONFIG as Kubeflow sets it") {
  const std::string tf_config =
      R"({"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],)"
      R"("ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],)"
      R"("worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]},)"
      R"("task":{"type":"worker","index":1},"environment":"cloud"})";
  auto spec = net::parse_tf_config(tf_config);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(spec->self() == net::TaskName{"worker", 1});
  CHECK(spec->self_address()->to_string() == "mnist-worker-1.kubeflow.svc:2222");
  CHECK(addresses(*spec, "ps").size() == 2);
  CHECK(spec->chief().value() == net::TaskName{"chief", 0});
  CHECK_FALSE(spec->is_chief());

  // Round trip through the form a launcher hands to its children.
  auto back = net::parse_tf_config(spec->to_tf_config());
  REQUIRE(back.ok());
  CHECK(back->jobs() == spec->jobs());
  CHECK(back->self() == spec->self());

  SUBCASE("default port, master as chief, string index") {
    auto s = net::parse_tf_config(R"({"cluster":{"master":["m"],"worker":["w0","w1:3333"]},"task":{"type":"master","index":"0"}})");
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    CHECK(addresses(*s, "worker") == Strings{"w0:2222", "w1:3333"});
    CHECK(s->is_chief());
  }
  SUBCASE("the evaluator stands outside the cluster") {
    auto s = net::parse_tf_config(R"({"cluster":{"chief":["c:2222"],"worker":["w:2222"]},"task":{"type":"evaluator","index":0}})");
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    CHECK(s->self() == net::TaskName{"evaluator", 0});
    CHECK(s->self_address().status().code() == af::Code::not_found);
    CHECK_FALSE(s->is_chief());
  }
  SUBCASE("bad TF_CONFIG values name the field and the value") {
    const std::string cluster = R"("cluster":{"worker":["w0:2222","w1:2222"],"ps":["p:2222"]})";
    auto bad = [&](const std::string& task) { return error_of(net::parse_tf_config("{" + cluster + ",\"task\":" + task + "}")); };
    CHECK(bad(R"({"type":"worker","index":5})") == "TF_CONFIG: task.index 5 is out of range for job 'worker' (2 tasks)");
    CHECK(bad(R"({"type":"worker","index":-1})") == "TF_CONFIG: task.index -1 is negative");
    CHECK(bad(R"({"type":"worker","index":1.5})") == "TF_CONFIG: task.index 1.5 is not a task number");
    CHECK(bad(R"({"type":"chief","index":0})") == "TF_CONFIG: task.type 'chief' is not a job of the cluster (it has ps, worker)");
    CHECK(bad(R"({"type":"boss","index":0})") == "TF_CONFIG: task.type 'boss' is not one of chief, master, worker, ps, evaluator");
    CHECK(bad(R"({"type":3})") == "TF_CONFIG: task.type 3 is not a job name");
    CHECK(bad(R"({"index":0})") == "TF_CONFIG: task.type is missing");
    CHECK(bad(R"("worker")") == "TF_CONFIG: task is \"worker\", not {\"type\": ..., \"index\": ...}");
    CHECK(error_of(net::parse_tf_config(R"({"cluster":{"worker":["w0:2222","w1:http"]},"task":{"type":"worker","index":0}})")) ==
          "TF_CONFIG: cluster.worker[1] 'w1:http' has port 'http', not a number from 0 to 65535");
    CHECK(error_of(net::parse_tf_config(R"({"cluster":{"workers":["w0"]},"task":{"type":"worker","index":0}})")) ==
          "TF_CONFIG: cluster.workers: 'workers' is not one of chief, master, worker, ps, evaluator");
    CHECK(error_of(net::parse_tf_config(R"({"cluster":{"worker":"w0:2222"},"task":{"type":"worker","index":0}})")) ==
          "TF_CONFIG: cluster.worker is \"w0:2222\", not a list of addresses");
    CHECK(error_of(net::parse_tf_config(R"({"cluster":{"worker":[2222]},"task":{"type":"worker","index":0}})")) ==
          "TF_CONFIG: cluster.worker[0] is 2222, not \"host:port\"");
    CHECK(error_of(net::parse_tf_config(R"({"task":{"type":"worker","index":0}})")) == "TF_CONFIG: cluster is missing");
    CHECK(error_of(net::parse_tf_config(R"({"cluster":{"worker":["w"]}})")) ==
          "TF_CONFIG: task is missing: give --job_name and --task_index, or a \"task\" object");
    CHECK(error_of(net::parse_tf_config("")) == "TF_CONFIG is set but empty");
    const std::string not_json = error_of(net::parse_tf_config(R"({"cluster": {"worker": ["w"])"));
    CHECK(not_json.rfind("TF_CONFIG: not valid JSON (parse error at line 1, column ", 0) == 0);
    CHECK(error_of(net::parse_tf_config("[1]")) == "TF_CONFIG: is [1], not a JSON object");
  }
}

TEST_CASE("--cluster_spec FILE in TF's plain form or the TF_CONFIG form") {
  const auto dir = std::filesystem::temp_directory_path() / ("af_cluster_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string plain = (dir / "plain.json").string(), full = (dir / "full.json").string();
  std::ofstream(plain) << R"({"ps": ["p0:2222"], "worker": ["w0:2222", "w1:2222"]})";
  std::ofstream(full) << R"({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 1}})";

  auto spec = net::read_cluster_spec_file(plain, net::TaskName{"ps", 0});
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(spec->self_address()->to_string() == "p0:2222");
  CHECK(error_of(net::read_cluster_spec_file(plain)) ==
        "cluster spec file '" + plain + "': task is missing: give --job_name and --task_index, or a \"task\" object");
  CHECK(error_of(net::read_cluster_spec_file(plain, net::TaskName{"worker", 2})) ==
        "cluster spec file '" + plain + "': --task_index 2 is out of range for job 'worker' (2 tasks)");
  CHECK(net::read_cluster_spec_file(full)->self() == net::TaskName{"worker", 1});
  CHECK(net::read_cluster_spec_file(full, net::TaskName{"worker", 0})->self() == net::TaskName{"worker", 0});  // flags win
  CHECK(net::read_cluster_spec_file((dir / "missing.json").string()).status().code() == af::Code::not_found);

  // resolve_cluster: the file comes first, its task from the flags.
  net::ClusterOptions opts;
  opts.cluster_spec_file = plain;
  opts.flags.job_name = "worker";
  opts.flags.task_index = "1";
  auto resolved = net::resolve_cluster(opts, {{"TF_CONFIG", "not even JSON"}});
  REQUIRE_MESSAGE(resolved.ok(), resolved.status().to_string());
  CHECK(resolved->self_address()->to_string() == "w1:2222");
  std::filesystem::remove_all(dir);
}

TEST_CASE("Slurm compressed node lists expand as scontrol show hostnames does") {
  auto expand = [](const char* list) { return net::expand_hostlist(list).value(); };
  CHECK(expand("node[01-03,7]") == Strings{"node01", "node02", "node03", "node7"});
  CHECK(expand("a[1-2],b5") == Strings{"a1", "a2", "b5"});
  CHECK(expand("tux[8-10]") == Strings{"tux8", "tux9", "tux10"});
  CHECK(expand("gpu[098-101]") == Strings{"gpu098", "gpu099", "gpu100", "gpu101"});
  CHECK(expand("r[1-2]-n[1-2]") == Strings{"r1-n1", "r1-n2", "r2-n1", "r2-n2"});
  CHECK(expand("single") == Strings{"single"});
  CHECK(expand("x.cluster.org,y[3]") == Strings{"x.cluster.org", "y3"});
  CHECK(error_of(net::expand_hostlist("node[01-")) == "host list 'node[01-' has an unclosed '['");
  CHECK(error_of(net::expand_hostlist("node[3-1]")) == "host list 'node[3-1]': range '3-1' runs backwards");
  CHECK(error_of(net::expand_hostlist("node[a-b]")) == "host list 'node[a-b]': range 'a-b' is not N or N-M");
  CHECK(error_of(net::expand_hostlist("a,,b")) == "host list 'a,,b' has an empty entry");
  CHECK(error_of(net::expand_hostlist("a]")) == "host list 'a]' has a ']' without a '['");
  CHECK(error_of(net::expand_hostlist("n[1-1000000]x[1-1000000]")).find("expands to more than") != std::string::npos);
  CHECK(net::expand_tasks_per_node("2(x3),1").value() == std::vector<int>{2, 2, 2, 1});
  CHECK(error_of(net::expand_tasks_per_node("2(3)")) == "task counts '2(3)': '2(3)' is not N or N(xM)");
}

TEST_CASE("Slurm: ranks fill nodes in order, ports from base_port plus the local rank") {
  net::Environment env = {{"SLURM_PROCID", "3"},
                          {"SLURM_NTASKS", "5"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURMD_NODENAME", "node02"},
                          {"SLURM_JOB_NODELIST", "node[01-02],gpu7"},
                          {"SLURM_TASKS_PER_NODE", "2(x2),1"}};
  net::LauncherOptions opts;
  opts.base_port = 5000;
  opts.num_ps = 1;
  auto spec = net::cluster_from_slurm(env, opts);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(addresses(*spec, "ps") == Strings{"node01:5000"});
  CHECK(addresses(*spec, "worker") == Strings{"node01:5001", "node02:5000", "node02:5001", "gpu7:5000"});
  CHECK(spec->self() == net::TaskName{"worker", 2});
  CHECK(spec->self_address()->to_string() == "node02:5001");
  CHECK(spec->chief().value() == net::TaskName{"worker", 0});

  SUBCASE("without tasks per node, SLURM_NTASKS splits evenly; the step's list wins") {
    net::Environment e = {{"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "4"},
                          {"SLURM_JOB_NODELIST", "n[1-4]"},
                          {"SLURM_STEP_NODELIST", "n[1-2]"}};
    auto s = net::cluster_from_slurm(e, {});
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    CHECK(addresses(*s, "worker") == Strings{"n1:2222", "n1:2223", "n2:2222", "n2:2223"});
    CHECK(s->is_chief());
  }
  SUBCASE("bad Slurm environments") {
    net::Environment e = env;
    e["SLURM_PROCID"] = "5";
    CHECK(error_of(net::cluster_from_slurm(e, opts)) == "SLURM_PROCID: 5 is out of range for SLURM_NTASKS 5");
    e["SLURM_PROCID"] = "three";
    CHECK(error_of(net::cluster_from_slurm(e, opts)) == "SLURM_PROCID: 'three' is not an integer of at least 0");
    e = env;
    e["SLURM_LOCALID"] = "0";
    CHECK(error_of(net::cluster_from_slurm(e, opts)) ==
          "SLURM_LOCALID: 0 disagrees with the layout, which puts rank 3 at local rank 1 on node02 (launch with srun "
          "--distribution=block)");
    e = env;
    e["SLURMD_NODENAME"] = "gpu7";
    CHECK(error_of(net::cluster_from_slurm(e, opts)) ==
          "SLURMD_NODENAME: 'gpu7' disagrees with the layout, which puts rank 3 on node02 (launch with srun "
          "--distribution=block)");
    e = env;
    e["SLURM_JOB_NODELIST"] = "node[01-02,gpu7";
    CHECK(error_of(net::cluster_from_slurm(e, opts)).rfind("SLURM_JOB_NODELIST: host list 'node[01-02,gpu7' ", 0) == 0);
    e = env;
    e["SLURM_TASKS_PER_NODE"] = "2(x3)";
    // Three counts for three nodes, but six tasks for five.
    CHECK(error_of(net::cluster_from_slurm(e, opts)) == "SLURM_TASKS_PER_NODE: '2(x3)' counts 6 tasks, SLURM_NTASKS is 5");
    e["SLURM_TASKS_PER_NODE"] = "5";
    CHECK(error_of(net::cluster_from_slurm(e, opts)) == "SLURM_TASKS_PER_NODE: '5' counts 1 nodes, SLURM_JOB_NODELIST has 3");
    e.erase("SLURM_TASKS_PER_NODE");
    CHECK(error_of(net::cluster_from_slurm(e, opts)) ==
          "SLURM_NTASKS: 5 does not split evenly over the 3 nodes of SLURM_JOB_NODELIST, and SLURM_TASKS_PER_NODE is not set");
    e = env;
    e.erase("SLURM_JOB_NODELIST");
    CHECK(error_of(net::cluster_from_slurm(e, opts)) == "SLURM_JOB_NODELIST is not set");
    opts.num_ps = 5;
    CHECK(error_of(net::cluster_from_slurm(env, opts)) == "Slurm: num_ps 5 leaves no worker among the 5 tasks of SLURM_NTASKS");
    opts.num_ps = 0;
    opts.base_port = 65535;
    CHECK(error_of(net::cluster_from_slurm(env, opts)) ==
          "Slurm: base_port 65535 plus local rank 1 on node01 exceeds port 65535");
  }
}

TEST_CASE("Open MPI: ranks from the environment, hosts from a flag") {
  net::Environment env = {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}};
  net::LauncherOptions opts;
  opts.num_ps = 2;
  opts.mpi_hosts = "h[1-2]";  // one per node: two ranks on each
  auto spec = net::cluster_from_mpi(env, opts);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(addresses(*spec, "ps") == Strings{"h1:2222", "h1:2223"});
  CHECK(addresses(*spec, "worker") == Strings{"h2:2222", "h2:2223"});
  CHECK(spec->self() == net::TaskName{"worker", 0});
  CHECK(spec->is_chief());

  opts.mpi_hosts = "a,b,a,b";  // one per rank (a cyclic mapping): a host named again gets the next port
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  spec = net::cluster_from_mpi(env, opts);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(addresses(*spec, "ps") == Strings{"a:2222", "b:2222"});
  CHECK(addresses(*spec, "worker") == Strings{"a:2223", "b:2223"});

  SUBCASE("bad Open MPI setups") {
    opts.mpi_hosts = "h[1-2]";
    CHECK(error_of(net::cluster_from_mpi(env, opts)) ==
          "OMPI_COMM_WORLD_LOCAL_RANK: 1 disagrees with the layout, which puts rank 2 at local rank 0 on h2 (list "
          "--mpi_hosts one per rank in rank order, or map ranks --map-by slot)");
    env["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
    opts.mpi_hosts = "h[1-3]";
    CHECK(error_of(net::cluster_from_mpi(env, opts)) ==
          "--mpi_hosts: 'h[1-3]' names 3 hosts, which fits neither one per rank nor an even split of OMPI_COMM_WORLD_SIZE 4");
    opts.mpi_hosts = "";
    CHECK(error_of(net::cluster_from_mpi(env, opts)) ==
          "Open MPI: --mpi_hosts is empty: list the hosts, one per rank or one per node");
    opts.mpi_hosts = "h[1-2]";
    env["OMPI_COMM_WORLD_SIZE"] = "0";
    CHECK(error_of(net::cluster_from_mpi(env, opts)) == "OMPI_COMM_WORLD_SIZE: '0' is not an integer of at least 1");
    env.erase("OMPI_COMM_WORLD_SIZE");
    CHECK(error_of(net::cluster_from_mpi(env, opts)) == "OMPI_COMM_WORLD_SIZE is not set");
  }
}

TEST_CASE("resolve_cluster takes the first source present") {
  net::ClusterOptions opts;
  opts.launcher.mpi_hosts = "m1,m2";
  const net::Environment slurm = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "s[1-2]"}};
  const net::Environment mpi = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  const std::string tf_config = R"({"cluster":{"worker":["t0","t1"]},"task":{"type":"worker","index":0}})";

  CHECK(net::resolve_cluster(opts, mpi)->self_address()->to_string() == "m2:2222");
  net::Environment both = slurm;
  both.insert(mpi.begin(), mpi.end());
  CHECK(net::resolve_cluster(opts, both)->self_address()->to_string() == "s2:2222");
  both["TF_CONFIG"] = tf_config;
  CHECK(net::resolve_cluster(opts, both)->self_address()->to_string() == "t0:2222");
  opts.flags.worker_hosts = "f0,f1";
  opts.flags.job_name = "worker";
  opts.flags.task_index = "1";
  CHECK(net::resolve_cluster(opts, both)->self_address()->to_string() == "f1:2222");

  auto none = net::resolve_cluster(net::ClusterOptions{}, net::Environment{});
  CHECK(none.status().code() == af::Code::not_found);
  CHECK(none.status().message().find("TF_CONFIG") != std::string::npos);

  // The overload that reads this process's environment.
  ::setenv("TF_CONFIG", tf_config.c_str(), 1);
  auto from_env = net::resolve_cluster(net::ClusterOptions{});
  ::unsetenv("TF_CONFIG");
  REQUIRE_MESSAGE(from_env.ok(), from_env.status().to_string());
  CHECK(from_env->self_address()->to_string() == "t0:2222");
}
