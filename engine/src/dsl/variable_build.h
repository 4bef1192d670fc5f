// Internal to the DSL: the pieces get_variable builds a variable from, shared by the
// partitioned get_variable (partitioned_variables.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "actorflow/variables.h"

namespace actorflow {

// A VariableV2 node named `name` as given (scopes apply) with `extra_attrs`, and its
// "<name>/Assign" init op from the value `make_value` builds, made where the variable
// lives; recorded in the variable collections.
Output add_variable(Graph& g, DType dtype, const Shape& shape, const std::string& name,
                    const std::function<Output()>& make_value, bool trainable,
                    std::map<std::string, AttrValue> extra_attrs = {});

// initial_value for the shard `part` of a variable of shape `full`, at `offset` along
// `axis`: a constant tensor gives its slice, Glorot scales by the whole shape (as TF does
// with partition_info), the random initializers draw `part` on their own.
Output initial_value_slice(Graph& g, const Initializer& init, const Shape& full, int axis, int64_t offset,
                           const Shape& part, const std::string& name = "Initializer");

}  // namespace actorflow
