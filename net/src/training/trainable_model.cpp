#include <algorithm>

#include "actorflow/net/training_loop.h"

namespace actorflow::net {

std::vector<train::OptimizerVars> TrainableModel::optimizers_or(optim::Optimizer* fallback) const {
  if (!optimizers.empty()) return optimizers;
  return {{fallback, {}}};
}

Status evaluate(Session& sess, const TrainableModel& m, const Tensor& x, const Tensor& y, double* loss,
                double* accuracy) {
  int64_t n = x.dim(0);
  double loss_sum = 0, acc_sum = 0;
  for (int64_t b = 0; b < n; b += 1000) {
    int64_t e = std::min(n, b + 1000);
    std::vector<Fetch> fetches{m.loss};
    if (m.accuracy.valid()) fetches.push_back(m.accuracy);
    FeedDict feeds{{m.x, x.slice_rows(b, e)}, {m.y, y.slice_rows(b, e)}};
    if (m.training.valid()) feeds.push_back({m.training, Tensor::scalar(false)});
    auto out = sess.run(fetches, feeds);
    if (!out.ok()) return out.status();
    loss_sum += (*out)[0].element_as_double(0) * static_cast<double>(e - b);
    if (m.accuracy.valid()) acc_sum += (*out)[1].element_as_double(0) * static_cast<double>(e - b);
  }
  *loss = n ? loss_sum / static_cast<double>(n) : 0;
  *accuracy = n ? acc_sum / static_cast<double>(n) : 0;
  return Status::OK();
}

}  // namespace actorflow::net
