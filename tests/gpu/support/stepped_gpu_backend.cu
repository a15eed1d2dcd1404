#include "tests/gpu/support/stepped_gpu_backend.cuh"

#include <algorithm>
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

SteppedGpuBackend::~SteppedGpuBackend() {
  if (side_stream_) {
    cudaStreamSynchronize(side_stream_);
    cudaStreamDestroy(side_stream_);
  }
  if (snapshot_) cudaEventDestroy(snapshot_);
}

void SteppedGpuBackend::start_evaluation_beside(const uint8_t* images, int64_t n, int chunk) {
  if (!side_stream_) {
    int least = 0, greatest = 0;
    AE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    AE_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, least));
    AE_CUDA_CHECK(cudaEventCreateWithFlags(&snapshot_, cudaEventDisableTiming));
  }
  ensure_capacity(chunk);
  if (side_bufs_.capacity() < chunk) {
    side_bufs_.allocate(*plan_, chunk, side_stream_);
    side_packs_.allocate(*plan_, side_stream_);
  }
  const int64_t P = arch_.param_count();
  side_params_.resize(size_t(P));
  side_loss_.resize(1);
  AE_CUDA_CHECK(cudaMemcpyAsync(side_params_.get(), params_.get(), sizeof(float) * size_t(P), cudaMemcpyDeviceToDevice,
                                stream_));
  AE_CUDA_CHECK(cudaEventRecord(snapshot_, stream_));
  AE_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, snapshot_, 0));
  side_packs_.pack(side_params_.get(), dt_, side_stream_);
  AE_CUDA_CHECK(cudaMemsetAsync(side_loss_.get(), 0, sizeof(double), side_stream_));
  const int64_t dim = arch_.image_dim();
  for (int64_t off = 0; off < n; off += chunk) {
    const int b = int(std::min<int64_t>(chunk, n - off));
    const uint8_t* imgs = images + off * dim;
    ae::cuda::im2col_input(imgs, nullptr, nullptr, b, arch_.input_channels(), arch_.height(), arch_.width(),
                           side_bufs_.get(plan_->col), plan_->col_pitch, dt_, side_stream_);
    for (const ae::cuda::LayerPlan& lp : plan_->layers) {
      ae::cuda::ConvArgs a = lp.forward.bind(side_bufs_, side_packs_, side_params_.get(), b);
      if (lp.output) {  // as forward_layer without a gradient: the loss only
        a.out = nullptr;
        a.out_nchw = nullptr;
        a.images_u8 = imgs;
        a.order = nullptr;
        a.order_pos = nullptr;
        a.grad_scale = float(2.0 / (double(b) * double(dim)));
        a.loss_sum = side_loss_.get();
      }
      a.tile = conv_tile(lp, false, a, b, ae::cuda::TileChoice::borrowed, side_stream_);
      ae::cuda::conv_igemm(a, dt_, side_stream_);
    }
  }
  side_n_ = n;
}

double SteppedGpuBackend::finish_evaluation_beside() {
  AE_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
  double sum = 0;
  AE_CUDA_CHECK(cudaMemcpy(&sum, side_loss_.get(), sizeof(double), cudaMemcpyDeviceToHost));
  return sum / (double(side_n_) * double(arch_.image_dim()));
}

void SteppedGpuBackend::rewind() { AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_)); }

void SteppedGpuBackend::replay_step(int batch) { AE_CUDA_CHECK(cudaGraphLaunch(graph_for(batch, batch), stream_)); }

}  // namespace gpu_test
