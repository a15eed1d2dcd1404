#include "tests/gpu/support/stepped_gpu_backend.cuh"

#include <stdexcept>
#include <utility>

namespace gpu_test {

std::vector<StepStage> SteppedGpuBackend::stages_of_step(int batch) {
  if (n_train_ == 0) throw std::logic_error("stages_of_step: set_train_images() first");
  if (n_train_ < batch) throw std::invalid_argument("stages_of_step: fewer training images than the batch");
  // Two batches' worth of order, so that the step's im2col of the next batch has a whole
  // batch to gather, as inside an epoch; the first batch's im2col is built here, as
  // train_epoch builds it before its first step.
  std::vector<int64_t> order(static_cast<size_t>(2 * batch));
  for (int i = 0; i < 2 * batch; ++i) order[size_t(i)] = i % batch;
  upload_order(order);
  ensure_capacity(batch);
  ensure_workspaces(batch);
  AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
  input_im2col(train_images_.get(), order_.get(), pos_.get(), batch, stream_);
  std::vector<StepStage> out;
  for (ae::cuda::Stage& s : step_stages(batch, batch)) out.push_back({s.name, s.flops, std::move(s.run)});
  return out;
}

std::string SteppedGpuBackend::conv_tiles() const {
  std::string out;
  for (const auto& [key, tile] : conv_tiles_) {
    const auto& [layer, input_grad, batch] = key;
    out += (out.empty() ? "" : ", ") + std::string("layer ") + std::to_string(layer) + (input_grad ? " bwd " : " fwd ") +
           ae::cuda::conv_tile_name(tile) + " (batch " + std::to_string(batch) + ")";
  }
  return out;
}

void SteppedGpuBackend::rewind() { AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_)); }

void SteppedGpuBackend::replay_step(int batch) { AE_CUDA_CHECK(cudaGraphLaunch(graph_for(batch, batch), stream_)); }

}  // namespace gpu_test
