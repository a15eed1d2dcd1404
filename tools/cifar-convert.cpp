// cifar-convert: the official CIFAR-10 binary batches → one HDF5 image-dataset file
// (3×32×32, CIFAR-10's ten class names; docs/FORMATS.md).
#include <algorithm>

#include "common/atomic_output.h"
#include "common/cifar_binary.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/provenance.h"
#include "common/sha256.h"
#include "common/timer.h"

namespace {

const cae::ToolInfo kInfo{
    "cifar-convert", "convert the CIFAR-10 binary batches (folder or .tar.gz) to an HDF5 dataset",
    "cifar-convert --input ../shared/cifar-10-batches-bin -o data/cifar10.h5", false, true,
    "try --train-limit and --test-limit"};

struct Options {
  std::string input;
  int64_t train_limit = 0;
  int64_t test_limit = 0;
};

// A folder input is hashed file by file (batch order), so its provenance is stable.
cae::InputFile hash_cifar_input(const std::string& input) {
  cae::Sha256 all;
  bool folder = false;
  for (const char* base : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"}) {
    FILE* f = fopen((input + "/" + base).c_str(), "rb");
    if (!f) break;
    folder = true;
    fclose(f);
    std::string h = cae::sha256_file(input + "/" + base);
    all.update(h.data(), h.size());
  }
  return folder ? cae::InputFile{input, all.hex_digest()} : cae::hash_input(input);
}

void convert(const Options& opt, const cae::CommonOptions& common) {
  cae::Stopwatch clock;
  cae::CifarBinary data = cae::read_cifar_binary(opt.input, opt.train_limit, opt.test_limit);
  double read_s = clock.seconds();

  cae::AtomicOutput out(common.output);
  cae::Hdf5Writer w(out.temp_path(), common.output);
  cae::write_split(w, "train", data.train);
  cae::write_split(w, "test", data.test);
  cae::Provenance prov{cae::kDatasetFormat, 1, cae::options_json(), {hash_cifar_input(opt.input)}};
  cae::write_provenance(w, prov);
  cae::write_class_names(w, cae::cifar10_class_names());
  w.close();
  out.commit();

  double total_s = clock.seconds();
  cae::log_info("wrote %s: %lld train + %lld test images in %.2f s (read %.2f s)", common.output.c_str(),
                static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()), total_s, read_s);
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("train", data.train.size())
                             .add("test", data.test.size())
                             .add("seconds", total_s)
                             .str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("-i,--input", opt.input, "cifar-10-batches-bin folder or cifar-10-binary.tar.gz")->required();
        app.add_option("--train-limit", opt.train_limit, "Keep the first N training images (0 = all 50,000)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--test-limit", opt.test_limit, "Keep the first N test images (0 = all 10,000)")
            ->check(CLI::NonNegativeNumber);
      },
      [&] { convert(opt, common); });
}
