// Internal to ops/cpu: the Eigen view of a DeviceContext and of tensors.
#pragma once
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include "actorflow/kernel.h"

namespace actorflow {

inline const Eigen::ThreadPoolDevice& eigen_cpu(const OpKernelContext& ctx) {
  return *static_cast<const Eigen::ThreadPoolDevice*>(ctx.device()->native_handle());
}

template <typename T>
using EigenMatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Aligned64>;
template <typename T>
using ConstEigenMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

template <typename T, int R>
Eigen::TensorMap<Eigen::Tensor<T, R, Eigen::RowMajor>> as_eigen(Tensor& t, const std::array<Eigen::Index, R>& dims) {
  return Eigen::TensorMap<Eigen::Tensor<T, R, Eigen::RowMajor>>(t.data<T>(), dims);
}
template <typename T, int R>
Eigen::TensorMap<Eigen::Tensor<const T, R, Eigen::RowMajor>> as_eigen(const Tensor& t, const std::array<Eigen::Index, R>& dims) {
  return Eigen::TensorMap<Eigen::Tensor<const T, R, Eigen::RowMajor>>(t.data<T>(), dims);
}

}  // namespace actorflow
