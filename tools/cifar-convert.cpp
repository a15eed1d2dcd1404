// cifar-convert: an image dataset → one HDF5 image-dataset file (docs/FORMATS.md). Reads
// the CIFAR-10 binary batches (folder or .tar.gz), IDX files (MNIST, Fashion-MNIST), the
// CIFAR-100 binary files and image folders (DIR/train/CLASS/*.png|jpg, DIR/test/CLASS/*);
// the format is detected (common/dataset_sources.h) unless --format names it.
#include <algorithm>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/dataset_sources.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"

namespace {

const cae::ToolInfo kInfo{
    "cifar-convert",
    "convert an image dataset (CIFAR-10/100 binary, MNIST-style IDX, image folder) to an HDF5 dataset",
    "cifar-convert --input ../shared/cifar-10-batches-bin -o data/cifar10.h5\n"
    "  cifar-convert --input /usr/share/datasets/fashion-mnist -o data/fashion-mnist.h5\n"
    "  cifar-convert --input photos/ --image-size 64 --color rgb --skip-bad -o data/photos.h5",
    false, true, "try --train-limit and --test-limit, or a smaller --image-size"};

struct Options {
  std::string input, format, labels = "fine", image_size, color = "auto";
  bool skip_bad = false;
  int64_t train_limit = 0;
  int64_t test_limit = 0;
};

// "H" or "HxW" → H, W (each 1 … 4096).
void parse_image_size(const std::string& s, int& H, int& W) {
  if (s.empty()) return;
  const size_t x = s.find_first_of("xX");
  auto num = [&](const std::string& t) {
    if (t.empty() || t.size() > 4 || !std::all_of(t.begin(), t.end(), ::isdigit))
      throw cae::UsageError("--image-size: " + cae::quoted_name("'" + s + "'") + " is not H or HxW");
    const int v = std::stoi(t);
    if (v < 1 || v > 4096) throw cae::UsageError("--image-size: sides must be 1 to 4096 pixels");
    return v;
  };
  H = num(s.substr(0, x));
  W = x == std::string::npos ? H : num(s.substr(x + 1));
}

void add_options(CLI::App& app, Options& opt) {
  app.add_option("-i,--input", opt.input,
                 "cifar-10-batches-bin or cifar-100-binary folder or .tar.gz, a folder of IDX files, or an "
                 "image folder (train/CLASS/*, test/CLASS/*)")
      ->required();
  app.add_option("--format", opt.format, "Input format (detected when omitted)")
      ->check(CLI::IsMember({"cifar10", "idx", "cifar100", "folder"}));
  app.add_option("--labels", opt.labels, "CIFAR-100 labels: fine (100 classes) or coarse (20)")
      ->check(CLI::IsMember({"fine", "coarse"}));
  app.add_option("--image-size", opt.image_size, "Image folders: resize every image to H or HxW pixels");
  app.add_option("--color", opt.color, "Image folders: rgb, gray, or auto (gray when every image is)")
      ->check(CLI::IsMember({"auto", "rgb", "gray"}));
  app.add_flag("--skip-bad", opt.skip_bad, "Image folders: skip images that do not decode (counted)");
  cae::default_means(app.add_option("--train-limit", opt.train_limit, "Keep the first N training images (0 = all)")
                         ->check(CLI::NonNegativeNumber),
                     "all");
  cae::default_means(app.add_option("--test-limit", opt.test_limit, "Keep the first N test images (0 = all)")
                         ->check(CLI::NonNegativeNumber),
                     "all");
}

void run(const Options& opt, const cae::CommonOptions& common) {
  cae::Stopwatch clock;
  std::optional<cae::PhaseScope> phase(cae::Phase::read);  // reading and decoding the source
  cae::SourceOptions so;
  so.format = opt.format, so.labels = opt.labels, so.skip_bad = opt.skip_bad;
  so.train_limit = opt.train_limit, so.test_limit = opt.test_limit;
  parse_image_size(opt.image_size, so.height, so.width);
  so.channels = opt.color == "rgb" ? 3 : opt.color == "gray" ? 1 : 0;
  cae::SourceDataset data = cae::read_source(opt.input, so);
  double read_s = clock.seconds();

  phase.emplace(cae::Phase::write);
  cae::AtomicOutput out(common.output);
  cae::Hdf5Writer w(out.temp_path(), common.output);
  cae::write_split(w, "train", data.train);
  cae::write_split(w, "test", data.test);
  cae::Provenance prov{cae::kDatasetFormat, 1, cae::options_json(), {data.input}};
  cae::write_provenance(w, prov);
  cae::write_class_names(w, data.class_names);
  w.set_attr("/", "source_format", data.format);
  w.set_attr("/", "source_dataset", data.name);
  if (data.format == "cifar100") w.set_attr("/", "label_set", opt.labels);
  if (data.format == "folder") w.set_attr("/", "skipped_images", data.skipped);
  w.close();
  out.commit();
  phase.reset();

  double total_s = clock.seconds();
  cae::log_info("wrote %s: %lld train + %lld test images of %dx%dx%d, %zu classes (%s) in %.2f s (read %.2f s)%s",
                common.output.c_str(), static_cast<long long>(data.train.size()),
                static_cast<long long>(data.test.size()), data.train.C, data.train.H, data.train.W,
                data.class_names.size(), data.name.c_str(), total_s, read_s,
                data.skipped ? cae::strprintf("; skipped %lld unreadable images", static_cast<long long>(data.skipped)).c_str() : "");
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("format", data.format)
                             .add("train", data.train.size())
                             .add("test", data.test.size())
                             .add("classes", static_cast<int64_t>(data.class_names.size()))
                             .add("skipped", data.skipped)
                             .add("seconds", total_s)
                             .add_raw("phases", cae::phases_json())
                             .str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
