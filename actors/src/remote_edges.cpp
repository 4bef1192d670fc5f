// The rendezvous of one partition and the loopback transport; see remote_edges.h.
#include "actorflow/runtime/remote_edges.h"

#include <climits>
#include <utility>

namespace actorflow::runtime {

EdgeRendezvous::EdgeRendezvous(std::string location, std::shared_ptr<RemoteEdges> transport, int edge_capacity)
    : location_(std::move(location)), transport_(std::move(transport)), capacity_(edge_capacity < 1 ? 1 : edge_capacity) {}

void EdgeRendezvous::give_back_credit(const std::string& to, int64_t edge) {
  // A credit that cannot travel (the producer's host is gone) only matters to that
  // host's steps, which fail on their own deadline or connection error.
  (void)transport_->return_credit(to, edge);
}

void EdgeRendezvous::expect_edge(int64_t edge, const std::string& from_location) {
  std::lock_guard<std::mutex> lock(mu_);
  sources_[edge] = from_location;
}

void EdgeRendezvous::name_edge(int64_t edge, const std::string& tensor_name) {
  // The partitioner names an edge "edge_<id>_<producer>": its id is said already.
  const std::string prefix = "edge_" + std::to_string(edge) + "_";
  std::string producer = tensor_name.rfind(prefix, 0) == 0 ? tensor_name.substr(prefix.size()) : tensor_name;
  std::lock_guard<std::mutex> lock(mu_);
  names_[edge] = std::move(producer);
}

void EdgeRendezvous::on_edge(int64_t step, int64_t edge, EdgeValue value) {
  EdgeCallback cb;
  std::string from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(step, edge);
    auto w = edge_waits_.find(key);
    if (w != edge_waits_.end()) {
      cb = std::move(w->second.cb);
      from = std::move(w->second.from);
      edge_waits_.erase(w);
    } else if (!aborted_.count(step) && closed_.ok()) {
      arrived_[key] = std::move(value);
      return;
    } else {
      // Nobody will take it (the step was aborted here): the credit goes back at once.
      auto src = sources_.find(edge);
      if (src == sources_.end()) return;
      from = src->second;
    }
  }
  if (cb) cb(std::move(value));
  give_back_credit(from, edge);
}

void EdgeRendezvous::on_credit(int64_t edge) {
  CreditCallback cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = credits_.try_emplace(edge, capacity_).first;
    auto w = credit_waits_.find(edge);
    if (w == credit_waits_.end() || w->second.empty()) {
      ++it->second;
      return;
    }
    cb = std::move(w->second.front().cb);
    w->second.erase(w->second.begin());
  }
  cb(Status::OK());
}

void EdgeRendezvous::when_credit(int64_t step, int64_t edge, CreditCallback cb) {
  Status fail;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto ab = aborted_.find(step);
    if (!closed_.ok()) fail = closed_;
    else if (ab != aborted_.end()) fail = ab->second;
    else {
      auto it = credits_.try_emplace(edge, capacity_).first;
      if (it->second <= 0) {
        credit_waits_[edge].push_back({step, std::move(cb)});
        return;
      }
      --it->second;
    }
  }
  cb(fail);
}

void EdgeRendezvous::when_edge(int64_t step, int64_t edge, const std::string& from_location, EdgeCallback cb) {
  Result<EdgeValue> got = Status(Code::internal, "unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto ab = aborted_.find(step);
    auto key = std::make_pair(step, edge);
    if (!closed_.ok()) got = closed_;
    else if (ab != aborted_.end()) got = ab->second;
    else {
      auto it = arrived_.find(key);
      if (it == arrived_.end()) {
        edge_waits_[key] = {from_location, std::move(cb)};
        return;
      }
      got = std::move(it->second);
      arrived_.erase(it);
    }
  }
  bool taken = got.ok();
  cb(std::move(got));
  if (taken) give_back_credit(from_location, edge);
}

void EdgeRendezvous::abort_step(int64_t step, const Status& why) {
  std::vector<CreditCallback> credit_cbs;
  std::vector<EdgeCallback> edge_cbs;
  std::vector<std::pair<std::string, int64_t>> credits_back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.emplace(step, why);
    for (auto& [edge, waits] : credit_waits_) {
      for (auto it = waits.begin(); it != waits.end();) {
        if (it->step == step) {
          credit_cbs.push_back(std::move(it->cb));
          it = waits.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto it = edge_waits_.lower_bound({step, INT64_MIN}); it != edge_waits_.end() && it->first.first == step;) {
      edge_cbs.push_back(std::move(it->second.cb));
      it = edge_waits_.erase(it);
    }
    for (auto it = arrived_.lower_bound({step, INT64_MIN}); it != arrived_.end() && it->first.first == step;) {
      auto src = sources_.find(it->first.second);
      if (src != sources_.end()) credits_back.emplace_back(src->second, it->first.second);
      it = arrived_.erase(it);
    }
  }
  for (auto& cb : credit_cbs) cb(why);
  for (auto& cb : edge_cbs) cb(why);
  for (auto& [to, edge] : credits_back) give_back_credit(to, edge);
}

void EdgeRendezvous::forget_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_.erase(step);
}

void EdgeRendezvous::abort_all(const Status& why) {
  std::vector<CreditCallback> credit_cbs;
  std::vector<EdgeCallback> edge_cbs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_.ok()) closed_ = why.ok() ? cancelled("the rendezvous is closed") : why;
    for (auto& [edge, waits] : credit_waits_)
      for (auto& w : waits) credit_cbs.push_back(std::move(w.cb));
    credit_waits_.clear();
    for (auto& [key, w] : edge_waits_) edge_cbs.push_back(std::move(w.cb));
    edge_waits_.clear();
    arrived_.clear();
  }
  for (auto& cb : credit_cbs) cb(closed_);
  for (auto& cb : edge_cbs) cb(closed_);
}

std::string EdgeRendezvous::describe_waits(int64_t step) {
  std::map<std::string, std::string> edges_from;  // location -> "35 (dense/w), 41 (loss)"
  std::string credits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto describe = [&](int64_t edge) {
      auto n = names_.find(edge);
      return std::to_string(edge) + (n == names_.end() ? std::string() : " (" + n->second + ")");
    };
    for (auto it = edge_waits_.lower_bound({step, INT64_MIN}); it != edge_waits_.end() && it->first.first == step; ++it) {
      std::string& list = edges_from[it->second.from];
      list += (list.empty() ? "" : ", ") + describe(it->first.second);
    }
    for (auto& [edge, waits] : credit_waits_)
      for (auto& w : waits)
        if (w.step == step) credits += (credits.empty() ? "" : ", ") + describe(edge);
  }
  std::string out;
  for (auto& [from, list] : edges_from) out += (out.empty() ? "edges " : "; edges ") + list + " from " + from;
  if (!credits.empty()) out += (out.empty() ? "" : "; ") + std::string("credits of edges ") + credits;
  return out;
}

void LoopbackEdges::attach(const std::shared_ptr<EdgeRendezvous>& r) {
  std::lock_guard<std::mutex> lock(mu_);
  by_location_[r->location()] = r;
}

std::shared_ptr<EdgeRendezvous> LoopbackEdges::find(const std::string& location) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_location_.find(location);
  return it == by_location_.end() ? nullptr : it->second.lock();
}

Status LoopbackEdges::send_edge(const std::string& to_location, int64_t step, int64_t edge, EdgeValue value) {
  auto r = find(to_location);
  if (!r) return Status(Code::unavailable, "no partition at " + to_location + " to send edge " + std::to_string(edge) + " to");
  AF_ASSIGN_OR_RETURN(EdgeValue crossed, decode_tensor_message(encode_tensor_message(value)));
  r->on_edge(step, edge, std::move(crossed));
  return Status::OK();
}

Status LoopbackEdges::return_credit(const std::string& to_location, int64_t edge) {
  auto r = find(to_location);
  if (!r) return Status(Code::unavailable, "no partition at " + to_location + " to return a credit of edge " + std::to_string(edge) + " to");
  r->on_credit(edge);
  return Status::OK();
}

}  // namespace actorflow::runtime
