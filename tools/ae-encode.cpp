// ae-encode: a trained autoencoder's 8,192-d codes for every image of a dataset, streamed
// chunk by chunk so memory stays small (docs/FORMATS.md, "ae-features").
#include <omp.h>

#include <algorithm>
#include <sstream>

#include "kernels/ae/checkpoint.h"
#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/model.h"

namespace {

const cae::ToolInfo kInfo{"ae-encode", "encode images with a trained autoencoder (8,192 features per image)",
                          "ae-encode --model data/run/model.h5 --data data/cifar10.h5 -o data/run/features.h5", true,
                          true, "try a smaller --batch-size"};

struct Options {
  std::string model;
  std::string data;
  int batch_size = 256;
  std::string splits = "train,test";
  int threads = 0;
};

// Images per streamed chunk: ~4 MB of pixels and ~34 MB of features in memory at a time.
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

void encode(const Options& opt, const cae::CommonOptions& common) {
  const std::vector<std::string> splits = parse_splits(opt.splits);
  const cae::Device device = cae::resolve_device(common.device);
  const std::vector<float> params = cae::read_ae_params(opt.model);
  cae::DatasetReader data(opt.data);

  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  std::unique_ptr<ae::AeBackend> backend = device == cae::Device::gpu
                                               ? ae::make_gpu_backend(ae::OptimizerConfig{}, ae::Precision::fp32)
                                               : ae::make_cpu_backend(ae::OptimizerConfig{}, threads);
  backend->set_params(params);

  cae::AtomicOutput out(common.output);
  cae::Hdf5Writer w(out.temp_path(), common.output);
  const int64_t chunk = std::max<int64_t>(opt.batch_size, kChunkImages / opt.batch_size * opt.batch_size);
  std::vector<uint8_t> pixels(static_cast<size_t>(chunk * cae::kImageBytes));
  std::vector<float> features(static_cast<size_t>(chunk * ae::kLatentDim));
  cae::Stopwatch clock;
  double encode_s = 0;
  int64_t total = 0;
  for (const std::string& split : splits) {
    const int64_t n = data.count(split);
    const std::string name = "/" + split + "/features";
    w.create<float>(name, {uint64_t(n), uint64_t(ae::kLatentDim)});
    cae::ProgressBar bar("encode " + split, n, "img");
    for (int64_t row = 0; row < n; row += chunk) {
      const int64_t rows = std::min(chunk, n - row);
      data.read_images(split, row, rows, pixels.data());
      cae::Stopwatch t;
      backend->encode(pixels.data(), rows, opt.batch_size, features.data());
      encode_s += t.seconds();
      w.write_rows<float>(name, uint64_t(row), uint64_t(rows), features.data());
      bar.update(row + rows);
    }
    w.write("/" + split + "/labels", data.read_labels(split));
    total += n;
  }
  const double seconds = clock.seconds();
  cae::Provenance prov{"ae-features", 1, cae::options_json(), {cae::hash_input(opt.model), cae::hash_input(opt.data)}};
  cae::write_provenance(w, prov);
  w.set_attr("/", "device", backend->describe());
  w.set_attr("/", "seconds", seconds);
  w.set_attr("/", "images_per_second", encode_s > 0 ? double(total) / encode_s : 0.0);
  w.set_attr("/", "class_names", data.class_names());
  w.close();
  out.commit();

  cae::log_info("wrote %s: %lld images x %d features in %.1f s (%.0f img/s encoding; %s)", common.output.c_str(),
                static_cast<long long>(total), ae::kLatentDim, seconds, encode_s > 0 ? double(total) / encode_s : 0.0,
                backend->describe().c_str());
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("images", total)
                             .add("seconds", seconds)
                             .add("images_per_second", encode_s > 0 ? double(total) / encode_s : 0.0)
                             .add("device", backend->describe())
                             .str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("--model", opt.model, "ae-model file (ae-train)")->required();
        app.add_option("--data", opt.data, "cifar10-dataset file (cifar-convert)")->required();
        app.add_option("--batch-size", opt.batch_size, "Images per encoder pass")->check(CLI::PositiveNumber);
        app.add_option("--split", opt.splits, "Splits to encode, comma-separated: train, test");
        app.add_option("--threads", opt.threads, "CPU threads (0 = OMP_NUM_THREADS or all cores)")
            ->check(CLI::NonNegativeNumber);
      },
      [&] { encode(opt, common); });
}
