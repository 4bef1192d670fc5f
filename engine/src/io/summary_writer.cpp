// The event file writer. Events are framed as TFRecords and buffered in memory; the
// file is opened O_APPEND so TensorBoard, which tails the file, only ever sees whole
// records once a write-out completes.
#include "actorflow/summary.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>

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

struct SummaryWriter::File {
  std::mutex mu;
  std::string path;
  int fd = -1;
  std::string buffer;
  double flush_secs = 10;
  std::chrono::steady_clock::time_point last_write;

  ~File() {
    if (fd >= 0) ::close(fd);
  }
  Status write_out_locked() {
    last_write = std::chrono::steady_clock::now();
    if (buffer.empty()) return Status::OK();
    Status s = st::write_all(fd, buffer.data(), buffer.size(), path);
    buffer.clear();
    return s;
  }
};

Result<SummaryWriter> SummaryWriter::create(const std::string& logdir, double flush_secs) {
  const std::string dir = logdir.empty() ? std::string(".") : logdir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return internal_error("SummaryWriter: cannot create log directory '" + logdir + "': " + ec.message());
  auto file = std::make_unique<File>();
  file->flush_secs = flush_secs;
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(wall_time()));
  const std::string base = dir + "/events.out.tfevents." + stamp + "." + hostname();
  // Two writers started in the same second in one directory get distinct files.
  for (int k = 0; file->fd < 0; ++k) {
    file->path = k == 0 ? base : base + "." + std::to_string(k);
    file->fd = ::open(file->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (file->fd < 0 && (errno != EEXIST || k > 1000))
      return internal_error("SummaryWriter: cannot create '" + file->path + "': " + std::strerror(errno));
  }
  file->buffer = pb::frame_record(pb::encode_file_version_event(wall_time(), "brain.Event:2"));
  AF_RETURN_IF_ERROR(file->write_out_locked());
  return SummaryWriter(std::move(file));
}

SummaryWriter::SummaryWriter(std::unique_ptr<File> file) : file_(std::move(file)) {}
SummaryWriter::SummaryWriter(SummaryWriter&&) noexcept = default;

SummaryWriter& SummaryWriter::operator=(SummaryWriter&& other) noexcept {
  if (this != &other) {
    (void)close();
    file_ = std::move(other.file_);
  }
  return *this;
}

SummaryWriter::~SummaryWriter() { (void)close(); }

const std::string& SummaryWriter::path() const {
  static const std::string none;
  return file_ ? file_->path : none;
}

Status SummaryWriter::append(const std::string& event) {
  if (!file_) return failed_precondition("SummaryWriter: the writer was moved from");
  std::lock_guard<std::mutex> lock(file_->mu);
  if (file_->fd < 0) return failed_precondition("SummaryWriter: '" + file_->path + "' is closed");
  file_->buffer += pb::frame_record(event);
  std::chrono::duration<double> since = std::chrono::steady_clock::now() - file_->last_write;
  if (since.count() >= file_->flush_secs || file_->buffer.size() >= (size_t{1} << 20)) return file_->write_out_locked();
  return Status::OK();
}

Status SummaryWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  AF_RETURN_IF_ERROR(check_tag(tag, "add_scalar"));
  return append(pb::encode_summary_event(wall_time(), step, encode_scalar_summary(tag, value)));
}

Status SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step) {
  AF_RETURN_IF_ERROR(check_tag(tag, "add_histogram"));
  auto summary = encode_histogram_summary(tag, values);
  if (!summary.ok()) return summary.status().with_context("SummaryWriter::add_histogram");
  return append(pb::encode_summary_event(wall_time(), step, *summary));
}

Status SummaryWriter::add_summary(const std::string& serialized_summary, int64_t step) {
  // Checked here, where the caller can still act: in the file it would be a corrupt
  // event that only TensorBoard notices.
  if (auto tags = summary_tags(serialized_summary); !tags.ok())
    return tags.status().with_context("SummaryWriter::add_summary");
  return append(pb::encode_summary_event(wall_time(), step, serialized_summary));
}

Status SummaryWriter::add_summary(const Tensor& summary, int64_t step) {
  if (!summary.valid() || summary.dtype() != DType::string || summary.num_elements() != 1)
    return invalid_argument("SummaryWriter::add_summary: expected a string tensor of one element (a fetched summary op), got " +
                            summary.type_string());
  return add_summary(summary.data<std::string>()[0], step);
}

Status SummaryWriter::add_graph(const Graph& graph) {
  return append(pb::encode_graph_event(wall_time(), pb::encode_graph_def(graph)));
}

Status SummaryWriter::flush() {
  if (!file_) return failed_precondition("SummaryWriter: the writer was moved from");
  std::lock_guard<std::mutex> lock(file_->mu);
  if (file_->fd < 0) return failed_precondition("SummaryWriter: '" + file_->path + "' is closed");
  AF_RETURN_IF_ERROR(file_->write_out_locked());
  if (::fsync(file_->fd) != 0)
    return internal_error("SummaryWriter: fsync of '" + file_->path + "': " + std::strerror(errno));
  return Status::OK();
}

Status SummaryWriter::close() {
  if (!file_) return Status::OK();
  std::lock_guard<std::mutex> lock(file_->mu);
  if (file_->fd < 0) return Status::OK();
  Status s = file_->write_out_locked();
  st::Fd fd(file_->fd);
  file_->fd = -1;
  Status c = fd.close(file_->path);
  return s.ok() ? c : s;
}

Result<std::vector<std::string>> read_tfrecords(const std::string& path) {
  AF_ASSIGN_OR_RETURN(std::string bytes, st::read_small_file(path, size_t{1} << 34));
  return pb::split_records(bytes, "record file '" + path + "'");
}

}  // namespace actorflow
