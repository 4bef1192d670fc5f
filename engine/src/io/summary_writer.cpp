// The event file writer. Events are framed as TFRecords and buffered in memory; the
// file is opened O_APPEND so TensorBoard, which tails the file, only ever sees whole
// records once a write-out completes.
#include "actorflow/summary.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/event_proto.h"
#include "io/safetensors.h"

namespace actorflow {
namespace {

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  std::string h(buf);
  for (char& c : h)
    if (c == '/') c = '_';
  return h;
}

Status check_tag(const std::string& tag, const char* what) {
  if (tag.empty()) return invalid_argument(std::string("SummaryWriter::") + what + ": the tag is empty");
  return Status::OK();
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& logdir, double flush_secs) : flush_secs_(flush_secs) {
  std::error_code ec;
  std::filesystem::create_directories(logdir.empty() ? "." : logdir, ec);
  if (ec) throw Error(internal_error("SummaryWriter: cannot create log directory '" + logdir + "': " + ec.message()));
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(wall_time()));
  const std::string base = (logdir.empty() ? std::string(".") : logdir) + "/events.out.tfevents." + stamp + "." + hostname();
  // Two writers started in the same second in one directory get distinct files.
  for (int k = 0; fd_ < 0; ++k) {
    path_ = k == 0 ? base : base + "." + std::to_string(k);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || k > 1000))
      throw Error(internal_error("SummaryWriter: cannot create '" + path_ + "': " + std::strerror(errno)));
  }
  last_write_ = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  buffer_ = pb::frame_record(pb::encode_file_version_event(wall_time(), "brain.Event:2"));
  Status s = write_out_locked();
  if (!s.ok()) {
    ::close(fd_);
    fd_ = -1;
    throw Error(s);
  }
}

SummaryWriter::~SummaryWriter() { (void)close(); }

Status SummaryWriter::write_out_locked() {
  last_write_ = std::chrono::steady_clock::now();
  if (buffer_.empty()) return Status::OK();
  Status s = st::write_all(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
  return s;
}

Status SummaryWriter::append(const std::string& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return failed_precondition("SummaryWriter: '" + path_ + "' is closed");
  buffer_ += pb::frame_record(event);
  std::chrono::duration<double> since = std::chrono::steady_clock::now() - last_write_;
  if (since.count() >= flush_secs_ || buffer_.size() >= (size_t{1} << 20)) return write_out_locked();
  return Status::OK();
}

Status SummaryWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  AF_RETURN_IF_ERROR(check_tag(tag, "add_scalar"));
  return append(pb::encode_scalar_event(wall_time(), step, tag, value));
}

Status SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step) {
  AF_RETURN_IF_ERROR(check_tag(tag, "add_histogram"));
  auto h = pb::make_histogram(tag, values);
  if (!h.ok()) return h.status().with_context("SummaryWriter::add_histogram");
  return append(pb::encode_histogram_event(wall_time(), step, tag, *h));
}

Status SummaryWriter::add_graph(const Graph& graph) {
  return append(pb::encode_graph_event(wall_time(), pb::encode_graph_def(graph)));
}

Status SummaryWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return failed_precondition("SummaryWriter: '" + path_ + "' is closed");
  AF_RETURN_IF_ERROR(write_out_locked());
  if (::fsync(fd_) != 0) return internal_error("SummaryWriter: fsync of '" + path_ + "': " + std::strerror(errno));
  return Status::OK();
}

Status SummaryWriter::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return Status::OK();
  Status s = write_out_locked();
  st::Fd fd(fd_);
  fd_ = -1;
  Status c = fd.close(path_);
  return s.ok() ? c : s;
}

Result<std::vector<std::string>> read_tfrecords(const std::string& path) {
  AF_ASSIGN_OR_RETURN(std::string bytes, st::read_small_file(path, size_t{1} << 34));
  return pb::split_records(bytes, "record file '" + path + "'");
}

}  // namespace actorflow
