#include "tests/gpu/support/plan_table.cuh"

#include <cstdio>
#include <sstream>

namespace gpu_test {

std::string plan_table(const ae::cuda::Plan& plan) {
  std::ostringstream out;
  out << plan.arch.describe() << ", " << (plan.dtype == ae::cuda::DType::bf16 ? "bf16" : "fp32") << ", batch "
      << plan.batch << "\n";
  char line[200];
  for (const ae::cuda::LayerPlan& lp : plan.layers) {
    std::snprintf(line, sizeof line, "  %-7s %4d -> %-4d %4dx%-4d Kpad %5d  %-34s %-30s branch %d\n",
                  lp.conv.name.c_str(), lp.conv.in, lp.conv.out, lp.conv.H, lp.conv.W, lp.forward.args.Kpad,
                  lp.forward_name.c_str(), lp.wgrad_name.c_str(), lp.wgrad.branch);
    out << line;
  }
  return out.str();
}

}  // namespace gpu_test
