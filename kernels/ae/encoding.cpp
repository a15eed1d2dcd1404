#include "kernels/ae/encoding.h"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "common/view_set.h"
#include "kernels/ae/data_parallel.h"
#include "kernels/ae/encode_pipeline.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/model.h"

namespace ae {

namespace {

// Images per streamed chunk: for the seed model ~3 MB of pixels and ~34 MB of features a
// view (the pipeline holds two of each).
constexpr int64_t kChunkImages = 1024;

std::vector<std::string> parse_splits(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string s;
  while (std::getline(ss, s, ',')) {
    if (s != "train" && s != "test") throw cae::UsageError("--split: '" + s + "' is not train or test");
    if (std::find(out.begin(), out.end(), s) != out.end()) throw cae::UsageError("--split: '" + s + "' given twice");
    out.push_back(s);
  }
  if (out.empty()) throw cae::UsageError("--split: no split given");
  return out;
}

// What a launcher and the ranks other than 0 return: rank 0 wrote the file.
EncodeResult not_lead() {
  EncodeResult r;
  r.lead = false;
  return r;
}

}  // namespace

EncodeResult run_encoding(const EncodeRequest& req) {
  const std::vector<std::string> splits = parse_splits(req.splits);
  // The CUDA driver is asked from here on, beside the reads (common/device.h).
  const cae::DeviceChoice choice(req.device);
  if (req.group.launch > 0) {
    const bool on_gpu = choice.get() == cae::Device::gpu;
    cae::launch_group_checked(req.group, on_gpu, req.output, /*share_cores=*/!on_gpu);
    return not_lead();
  }
  // A rank of a group encodes its share of every split's batches; rank 0 writes the file.
  cae::GroupRank me(req.group, req.output);
  const cae::GroupPlace& place = me.place;
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  cae::DatasetReader data(req.data);
  cae::BackgroundHashes hashes({req.model, req.data});  // both opened: regular files
  phase.emplace(cae::Phase::startup);  // the weights, the device and its context
  if (place.grouped() && choice.get() == cae::Device::gpu) cae::select_group_gpu(place.local_rank);
  // The driver's answer and the CUDA context are awaited while the first chunks are read,
  // except on a group rank, whose GPU is this thread's choice (select_group_gpu).
  Encoder encoder(req.model, choice, req.threads, req.batch_size, /*gpu_setup_in_background=*/!place.grouped());
  const Architecture& arch = encoder.architecture();
  encoder.check_input(req.data, data.channels(), data.height(), data.width(), data.image_shape_str());
  phase.reset();

  std::unique_ptr<cae::AtomicOutput> out;
  std::unique_ptr<FeaturesWriter> w;
  if (lead) {
    out = std::make_unique<cae::AtomicOutput>(req.output);
    w = std::make_unique<FeaturesWriter>(out->temp_path(), req.output, arch,
                                         req.float32 ? FeatureDtype::float32 : FeatureDtype::float16);
  }
  const int64_t chunk = std::max<int64_t>(req.batch_size, kChunkImages / req.batch_size * req.batch_size);
  const int64_t dim = arch.latent_dim();
  const cae::ViewSet views(req.flip, req.shifts);
  // Reads and writes on a thread of its own while this one encodes.
  EncodePipeline pipeline(data, encoder, views.views(), chunk);
  // float16 features are rounded by the encoder, not by the writer: one process writing them
  // all. A group's ranks send float32 codes to rank 0, which rounds them as it writes.
  const bool halves = lead && !place.grouped() && w->dtype() == FeatureDtype::float16;
  cae::Stopwatch clock;
  int64_t total = 0;
  for (const std::string& split : splits) {
    const int64_t n = data.count(split);
    if (lead) w->begin_split(split, n, views);
    const ImageRange mine = encode_share(n, req.batch_size, place.rank, place.world);
    // What a rank other than 0 sends: its rows' features of each view.
    std::vector<std::vector<float>> kept(static_cast<size_t>(views.count()));
    auto sink = [&](int64_t row, int64_t rows, int v, const float* features) {
      if (lead)
        w->write_rows(split, row, rows, features, v);
      else
        kept[size_t(v)].insert(kept[size_t(v)].end(), features, features + rows * dim);
    };
    cae::ProgressBar bar("encode " + split, mine.count, "img");
    auto progress = [&](int64_t done) { bar.update(done); };
    if (halves) {
      // Rounded where they are computed (on the GPU: before they cross the bus), written as they come.
      try {
        pipeline.run(split, mine.first, mine.count,
                     EncodePipeline::HalfSink([&](int64_t row, int64_t rows, int v, const cae::Half* features) {
                       w->write_rows(split, row, rows, features, v);
                     }),
                     progress);
      } catch (const CodeBeyondHalf& beyond) {
        w->fail_not_half(split, beyond.view, beyond.row, beyond.feature, beyond.value);
      }
    } else {
      pipeline.run(split, mine.first, mine.count, EncodePipeline::Sink(sink), progress);
    }
    bar.finish();
    if (place.grouped()) gather_rank_features(group, w.get(), split, n, req.batch_size, kept);
    if (lead) {
      cae::PhaseScope writing(cae::Phase::write);
      w->write_labels(split, data.read_labels(split));
    }
    total += n;
  }
  if (!lead) {  // its features are with rank 0, which writes the file
    group.finish();
    return not_lead();
  }
  EncodeResult r;
  r.seconds = clock.seconds();
  const int64_t encoded = total * views.count();
  // On a group rank 0's encoder time is its share's: the group's rate is the images over the
  // whole wall time.
  const double busy = place.grouped() ? r.seconds : encoder.seconds();
  r.images_per_second = busy > 0 ? double(encoded) / busy : 0.0;
  phase.reset();
  if (choice.get() == cae::Device::cpu)
    cae::record_effective("threads", std::to_string(req.threads > 0 ? req.threads : omp_get_max_threads()));
  cae::Provenance prov{"ae-features", 1, cae::options_json(), hashes.get()};
  phase.emplace(cae::Phase::write);
  w->finish(prov, {encoder.describe(), r.seconds, r.images_per_second, data.class_names()});
  out->commit();
  group.finish();
  phase.reset();

  r.images = total;
  r.views = views.spec();
  r.features = arch.latent_dim();
  r.device = encoder.describe();
  r.io_read_seconds = pipeline.read_seconds();
  r.io_write_seconds = pipeline.sink_seconds();
  cae::log_info("wrote %s: %lld images, %d view%s (%s) x %lld features (latent %dx%dx%d) in %.1f s (%.0f img/s "
                "encoding; %s)",
                req.output.c_str(), static_cast<long long>(total), views.count(), views.count() > 1 ? "s" : "",
                r.views.c_str(), static_cast<long long>(r.features), arch.latent_channels(), arch.latent_height(),
                arch.latent_width(), r.seconds, r.images_per_second, r.device.c_str());
  return r;
}

}  // namespace ae
