// ae-dump-gradients (a dev binary, built as build/tests/ae-dump-gradients): one batch's
// loss, decoder outputs and parameter gradients under a model's weights, computed by the CPU
// reference without an optimizer step, with the forward pass's decisions (max-pool picks,
// activations after each ReLU). tests/python/torch_reference.py compares them with
// PyTorch; the root attributes encoder_channels and input_shape tell it which model to build.
//
//   ae-dump-gradients --model model.h5 --data cifar10.h5 --batch-size 24 -o grads.h5
#include <omp.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/log.h"
#include "kernels/ae/checkpoint.h"
#include "tests/support/cpu_gradient.h"

namespace {

const cae::ToolInfo kInfo{"ae-dump-gradients", "one batch's loss, outputs, gradients and forward decisions (CPU reference)",
                          "ae-dump-gradients --model model.h5 --data cifar10.h5 --batch-size 24 -o grads.h5", false};

struct Options {
  std::string model, data;
  int batch_size = 24;
  int threads = 0;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model, "ae-model file whose weights are used")->required();
  app.add_option("--data", opt.data, "image-dataset file: the batch is its first training images")->required();
  app.add_option("--batch-size", opt.batch_size, "Images in the batch")->check(CLI::PositiveNumber);
  app.add_option("--threads", opt.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
}

// /decisions/<name> as torch_reference.py reads them: pool<i>_argmax and pool<i> for the
// encoder blocks i = 1..k, dconv<j> for the decoder convs j = 1..k, each [n, c, h, w].
void write_decisions(cae::Hdf5Writer& w, const ae::Architecture& arch, const std::vector<ae::ForwardTrace>& traces) {
  const int k = arch.depth();
  const uint64_t n = traces.size();
  auto gather = [&](auto member, int layer) {
    std::vector<std::decay_t<decltype((traces[0].*member)[0][0])>> all;
    for (const ae::ForwardTrace& t : traces) all.insert(all.end(), (t.*member)[layer].begin(), (t.*member)[layer].end());
    return all;
  };
  for (int i = 0; i < k; ++i) {
    const ae::ConvLayer& l = arch.conv(i);
    const cae::Shape shape{n, uint64_t(l.out), uint64_t(l.H / 2), uint64_t(l.W / 2)};
    w.write("/decisions/pool" + std::to_string(i + 1) + "_argmax", gather(&ae::ForwardTrace::pool_argmax, i).data(), shape);
    w.write("/decisions/pool" + std::to_string(i + 1), gather(&ae::ForwardTrace::pool, i).data(), shape);
  }
  for (int j = 0; j < k; ++j) {
    const ae::ConvLayer& l = arch.conv(k + j);
    w.write("/decisions/dconv" + std::to_string(j + 1), gather(&ae::ForwardTrace::relu, j).data(),
            cae::Shape{n, uint64_t(l.out), uint64_t(l.H), uint64_t(l.W)});
  }
}

void run(const Options& opt, const cae::CommonOptions& common) {
  const ae::ModelWeights model = ae::read_ae_params(opt.model);
  const ae::Architecture& arch = model.arch;
  cae::DatasetReader data(opt.data);
  if (data.channels() != arch.input_channels() || data.height() != arch.height() || data.width() != arch.width())
    cae::fail_file(opt.data, "has images of " + data.image_shape_str() + ", the model takes " + arch.describe());
  const cae::ImageSplit train = data.read("train", opt.batch_size);
  if (train.size() == 0) cae::fail_file(opt.data, "has no training images");
  const int n = static_cast<int>(train.size());
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  std::vector<float> outputs(size_t(n) * size_t(arch.image_dim())), grad(size_t(arch.param_count()));
  const double loss =
      ae::cpu_loss_and_gradient(arch, model.params, train.images.data(), n, threads, outputs.data(), grad.data());

  cae::AtomicOutput out(common.output);
  cae::Hdf5Writer w(out.temp_path(), common.output);
  const cae::Shape image_shape{uint64_t(n), uint64_t(arch.input_channels()), uint64_t(arch.height()),
                               uint64_t(arch.width())};
  w.write("/images", train.images.data(), image_shape);
  w.write("/outputs", outputs.data(), image_shape);
  w.write("/loss", &loss, cae::Shape{1});
  for (const ae::ConvLayer& c : arch.convs()) {
    w.write("/grad" + c.group + "/weight", grad.data() + c.weight_offset,
            cae::Shape{uint64_t(c.out), uint64_t(c.in), 3, 3});
    w.write("/grad" + c.group + "/bias", grad.data() + c.bias_offset, cae::Shape{uint64_t(c.out)});
  }
  write_decisions(w, arch, ae::cpu_forward_traces(arch, model.params, train.images.data(), n));
  w.set_attr("/", "encoder_channels", std::vector<int64_t>(arch.encoder_channels().begin(), arch.encoder_channels().end()));
  w.set_attr("/", "input_shape", std::vector<int64_t>{arch.input_channels(), arch.height(), arch.width()});
  w.close();
  out.commit();
  cae::log_info("wrote %s: loss %.8f over %d images", common.output.c_str(), loss, n);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(argc, argv, kInfo, common, [&](CLI::App& app) { add_options(app, opt); },
                       [&] { run(opt, common); });
}
