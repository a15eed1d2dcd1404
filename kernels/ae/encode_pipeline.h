// ae-encode's chunk loop with its three kinds of work overlapped: while the encoder computes
// chunk k's views on the calling thread, one I/O thread reads the pixels of the chunks ahead
// and writes chunk k−1's features. One thread does all the reading and writing, in order,
// because Debian's HDF5 must never be entered from two threads at once (docs/DECISIONS.md,
// "ae-encode overlaps"); the calling thread may use HDF5 only between run() calls. The
// reads run up to `read_ahead_bytes` of pixels ahead, so that the first ones fill the time
// the GPU's set-up takes, when there is nothing to write yet, instead of the writes' time
// (docs/DECISIONS.md, "ae-encode reads ahead"). The calling thread's phases
// (common/phases.h) are its encoding ("compute") and its waits for the I/O thread's reads
// ("read") and writes ("write").
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dataset.h"
#include "common/large_buffer.h"
#include "common/phases.h"
#include "common/view_set.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/features_reader.h"

namespace ae {

class EncodePipeline {
 public:
  // Receives the features [rows, latent_dim] of view `view` (an index into the views) of
  // rows [row, row + rows) of the split: on the I/O thread, in row order, then view order.
  using Sink = std::function<void(int64_t row, int64_t rows, int view, const float* features)>;
  // The same, the features rounded to float16 as a features file stores them (on the GPU,
  // before they leave it: Encoder::encode_view_halves).
  using HalfSink = std::function<void(int64_t row, int64_t rows, int view, const cae::Half* features)>;

  // Chunks of `chunk` images of `data`, encoded by `encoder` in each of `views`; both must
  // outlive the pipeline. The pixels of up to `read_ahead_bytes` worth of chunks (at least
  // two) are read ahead of the encoder.
  static constexpr int64_t kReadAheadBytes = int64_t{192} << 20;
  EncodePipeline(const cae::DatasetReader& data, Encoder& encoder, std::vector<cae::ImageView> views, int64_t chunk,
                 int64_t read_ahead_bytes = kReadAheadBytes);
  ~EncodePipeline();  // stops the I/O thread, dropping what a failed run() left queued
  EncodePipeline(const EncodePipeline&) = delete;
  EncodePipeline& operator=(const EncodePipeline&) = delete;

  // Encodes rows [first, first + count) of `split` and hands every view's features to
  // `sink`; returns when the sink has had them all. `progress(done)` runs on the calling
  // thread after each chunk. The first failure of either thread (a bad input, a non-finite
  // feature, a full disk) is rethrown here and ends the run.
  void run(const std::string& split, int64_t first, int64_t count, const Sink& sink,
           const std::function<void(int64_t done)>& progress = {});
  // run() of float16 features. A finite code beyond float16's range ends it with
  // CodeBeyondHalf, its view set.
  void run(const std::string& split, int64_t first, int64_t count, const HalfSink& sink,
           const std::function<void(int64_t done)>& progress = {});
  // The I/O thread's time so far in reading pixels and in the sink (overlapped with the
  // encoding: what the run would take without it). Between runs only.
  double read_seconds() const { return read_seconds_; }
  double sink_seconds() const { return sink_seconds_; }

 private:
  class IoThread;
  // Waits for the I/O thread's task `ticket`, the time charged to `phase` (this thread's
  // phases: what it waited for).
  void wait(uint64_t ticket, cae::Phase phase);
  template <typename Code, typename SinkOf>
  void run_chunks(const std::string& split, int64_t first, int64_t count, const SinkOf& sink,
                  const std::function<void(int64_t done)>& progress);
  const cae::DatasetReader& data_;
  Encoder& encoder_;
  std::vector<cae::ImageView> views_;
  int64_t chunk_;
  int64_t pixel_slots_;  // chunk k's pixels in slot k % pixel_slots_ of pixels_
  cae::LargeVector<uint8_t> pixels_;
  // The u-th (chunk, view) pair's features in slot u % 2 of two, one after the other: 64 MB
  // for the seed model, in huge pages (common/large_buffer.h says why); float16 features use
  // the first half of each slot.
  cae::LargeVector<float> features_;
  double read_seconds_ = 0, sink_seconds_ = 0;  // the I/O thread's
  std::unique_ptr<IoThread> io_;
};

}  // namespace ae
