// ae-encode: a trained autoencoder's latent codes (latent_dim = c·h·w of the model's
// architecture, 8,192 for the seed model) for every image of a dataset, streamed chunk by
// chunk so memory stays small, the reading and writing overlapped with the encoding
// (ae::EncodePipeline; docs/FORMATS.md, "ae-features"). --flip and --shifts K also
// encode other views of every image (mirrored left to right, shifted: cae::ViewSet) into
// /<split>/features_flip, features_shift1, ..., for svm-fit --augment and svm-eval --tta.
#include <omp.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "common/view_set.h"
#include "kernels/ae/encode_pipeline.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/data_parallel.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/model.h"

namespace {

const cae::ToolInfo kInfo{"ae-encode", "encode images with a trained autoencoder (its latent code per image)",
                          "ae-encode --model data/run/model.h5 --data data/cifar10.h5 -o data/run/features.h5", true,
                          true, "try a smaller --batch-size"};

struct Options {
  std::string model;
  std::string data;
  int batch_size = 256;
  std::string splits = "train,test";
  int threads = 0;
  bool flip = false;
  int shifts = 0;
  std::string dtype = "float16";
  cae::GroupOptions group;
};

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

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model, "ae-model file (ae-train)")->required();
  app.add_option("--data", opt.data, "image-dataset file (cifar-convert); its image shape must be the model's")->required();
  app.add_option("--batch-size", opt.batch_size, "Images per encoder pass")->check(CLI::PositiveNumber);
  app.add_option("--split", opt.splits, "Splits to encode, comma-separated: train, test");
  cae::add_threads_option(app, opt.threads);
  app.add_flag("--flip", opt.flip,
               "Also encode every image mirrored left to right (/<split>/features_flip: for svm-fit --augment "
               "flip and svm-eval --tta flip)");
  app.add_option("--shifts", opt.shifts,
                 "Also encode K shifted copies of every image (and their mirrors with --flip): 2 pixels right, "
                 "left, down, up, then diagonally (docs/SVM.md); /<split>/features_shift1.. for svm-fit --augment "
                 "shift:K and svm-eval --tta shift:K")
      ->check(CLI::Range(0, cae::kMaxShifts));
  app.add_option("--feature-dtype", opt.dtype,
                 "How the features are stored: float16 (half the bytes; rounded to nearest) or float32 (the codes "
                 "as computed; needed where a code exceeds float16's range, 65504)")
      ->check(CLI::IsMember({"float16", "float32"}));
  cae::add_group_options(app, opt.group, "encodes its share of every split's batches");
}

void run(const Options& opt, const cae::CommonOptions& common) {
  const std::vector<std::string> splits = parse_splits(opt.splits);
  // The CUDA driver is asked from here on, beside the reads (common/device.h).
  const cae::DeviceChoice choice(common.device);
  if (opt.group.launch > 0) {
    const bool on_gpu = choice.get() == cae::Device::gpu;
    cae::launch_group_checked(opt.group, on_gpu, common.output, /*share_cores=*/!on_gpu);
    return;
  }
  // A rank of a group encodes its share of every split's batches; rank 0 writes the file.
  cae::GroupRank me(opt.group, common.output);
  const cae::GroupPlace& place = me.place;
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  cae::DatasetReader data(opt.data);
  cae::BackgroundHashes hashes({opt.model, opt.data});  // both opened: regular files
  phase.emplace(cae::Phase::startup);  // the weights, the device and its context
  if (place.grouped() && choice.get() == cae::Device::gpu) cae::select_group_gpu(place.local_rank);
  // The driver's answer and the CUDA context are awaited while the first chunks are read,
  // except on a group rank, whose GPU is this thread's choice (select_group_gpu).
  ae::Encoder encoder(opt.model, choice, opt.threads, opt.batch_size, /*gpu_setup_in_background=*/!place.grouped());
  const ae::Architecture& arch = encoder.architecture();
  encoder.check_input(opt.data, data.channels(), data.height(), data.width(), data.image_shape_str());
  phase.reset();

  std::unique_ptr<cae::AtomicOutput> out;
  std::unique_ptr<ae::FeaturesWriter> w;
  if (lead) {
    out = std::make_unique<cae::AtomicOutput>(common.output);
    w = std::make_unique<ae::FeaturesWriter>(out->temp_path(), common.output, arch,
                                           opt.dtype == "float32" ? ae::FeatureDtype::float32 : ae::FeatureDtype::float16);
  }
  const int64_t chunk = std::max<int64_t>(opt.batch_size, kChunkImages / opt.batch_size * opt.batch_size);
  const int64_t dim = arch.latent_dim();
  const cae::ViewSet views(opt.flip, opt.shifts);
  // Reads and writes on a thread of its own while this one encodes.
  ae::EncodePipeline pipeline(data, encoder, views.views(), chunk);
  // float16 features are rounded by the encoder, not by the writer: one process writing them
  // all. A group's ranks send float32 codes to rank 0, which rounds them as it writes.
  const bool halves = lead && !place.grouped() && w->dtype() == ae::FeatureDtype::float16;
  cae::Stopwatch clock;
  int64_t total = 0;
  for (const std::string& split : splits) {
    const int64_t n = data.count(split);
    if (lead) w->begin_split(split, n, views);
    const ae::ImageRange mine = ae::encode_share(n, opt.batch_size, place.rank, place.world);
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
                     ae::EncodePipeline::HalfSink([&](int64_t row, int64_t rows, int v, const cae::Half* features) {
                       w->write_rows(split, row, rows, features, v);
                     }),
                     progress);
      } catch (const ae::CodeBeyondHalf& beyond) {
        w->fail_not_half(split, beyond.view, beyond.row, beyond.feature, beyond.value);
      }
    } else {
      pipeline.run(split, mine.first, mine.count, ae::EncodePipeline::Sink(sink), progress);
    }
    bar.finish();
    if (place.grouped()) ae::gather_rank_features(group, w.get(), split, n, opt.batch_size, kept);
    if (lead) {
      cae::PhaseScope writing(cae::Phase::write);
      w->write_labels(split, data.read_labels(split));
    }
    total += n;
  }
  if (!lead) {  // its features are with rank 0, which writes the file
    group.finish();
    return;
  }
  const double seconds = clock.seconds();
  const int64_t encoded = total * views.count();
  // On a group rank 0's encoder time is its share's: the group's rate is the images over the
  // whole wall time.
  const double busy = place.grouped() ? seconds : encoder.seconds();
  const double rate = busy > 0 ? double(encoded) / busy : 0.0;
  phase.reset();
  if (choice.get() == cae::Device::cpu)
    cae::record_effective("threads", std::to_string(opt.threads > 0 ? opt.threads : omp_get_max_threads()));
  cae::Provenance prov{"ae-features", 1, cae::options_json(), hashes.get()};
  phase.emplace(cae::Phase::write);
  w->finish(prov, {encoder.describe(), seconds, rate, data.class_names()});
  out->commit();
  group.finish();
  phase.reset();

  cae::log_info("wrote %s: %lld images, %d view%s (%s) x %lld features (latent %dx%dx%d) in %.1f s (%.0f img/s "
                "encoding; %s)",
                common.output.c_str(), static_cast<long long>(total), views.count(), views.count() > 1 ? "s" : "",
                views.spec().c_str(),
                static_cast<long long>(arch.latent_dim()),
                arch.latent_channels(), arch.latent_height(), arch.latent_width(), seconds, rate,
                encoder.describe().c_str());
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("images", total)
                             .add("flip", opt.flip)
                             .add("views", views.spec())
                             .add("features", arch.latent_dim())
                             .add("seconds", seconds)
                             .add("images_per_second", rate)
                             .add("device", encoder.describe())
                             .add_raw("phases", cae::phases_json())
                             .add("io_read_seconds", pipeline.read_seconds())
                             .add("io_write_seconds", pipeline.sink_seconds())
                             .str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
