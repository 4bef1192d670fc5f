// Ops with no gradient: sources (placeholders, constants, variables, random and filled
// tensors), tensors that depend only on a shape, state updates and NoOp. Registering
// them as not differentiable lets autodiff stop there instead of reporting a missing
// gradient.
#include "actorflow/gradients.h"

namespace actorflow {

AF_NO_GRADIENT("Shape");
AF_NO_GRADIENT("Fill");
AF_NO_GRADIENT("ZerosLike");
AF_NO_GRADIENT("OnesLike");
AF_NO_GRADIENT("RandomNormal");
AF_NO_GRADIENT("RandomUniform");
AF_NO_GRADIENT("TruncatedNormal");
AF_NO_GRADIENT("Placeholder");
AF_NO_GRADIENT("Const");
AF_NO_GRADIENT("VariableV2");
AF_NO_GRADIENT("ReadVariable");
AF_NO_GRADIENT("IsVariableInitialized");
AF_NO_GRADIENT("ReportUninitialized");
AF_NO_GRADIENT("Assign");
AF_NO_GRADIENT("AssignAdd");
AF_NO_GRADIENT("AssignSub");
AF_NO_GRADIENT("NoOp");

}  // namespace actorflow
