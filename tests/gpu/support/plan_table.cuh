// A GPU training plan (kernels/ae/cuda/plan.h) as a table the plan tests print: per layer the
// shapes, the padded reduction length, the forward and weight-gradient GEMMs chosen, and the
// stream branch. Only tests read it; the backend logs its own one-line description.
#pragma once
#include <string>

#include "kernels/ae/cuda/plan.h"

namespace gpu_test {

std::string plan_table(const ae::cuda::Plan& plan);

}  // namespace gpu_test
