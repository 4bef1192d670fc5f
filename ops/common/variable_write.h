// What a kernel does before it writes a variable's value in place.
#pragma once
#include "actorflow/resource_mgr.h"

namespace actorflow {

// A value another reader still holds (a read in flight, a step's fetch) is copied first,
// so that reader keeps what it read; the copy is a variable's value like the one it
// replaces (Buffer::mark_variable). The caller holds v.mu and counts its write
// (Buffer::note_write) once done.
inline void own_variable_value(VariableState& v) {
  if (v.value.buffer_use_count() <= 1) return;
  v.value = v.value.clone();
  v.value.buffer()->mark_variable();
}

}  // namespace actorflow
