// Times the pipeline's file I/O alone (issue 17): the dataset read of ae-encode, the
// features file write (ae-encode) and read (svm-fit / svm-eval), the svm-model file write
// (svm-fit) and read (svm-eval), on full-size synthetic files. `make bench-io` builds it like
// a tool, from the layers' libraries, and runs it through bench/io_bench.sh.
//
//   io_bench dataset F.h5                make a CIFAR-shaped image-dataset (write_split, deflate)
//   io_bench read-dataset F.h5           read both splits as ae-encode does (1,024 rows a call)
//   io_bench write-features F.h5 [N]     N×8,192 float32 train + 10,000 test, 1,024 rows a call
//   io_bench read-features F.h5          FeaturesReader::read of train (svm-fit) and test
//   io_bench write-model F.h5 [n_sv]     an svm-model with n_sv × 2,292 support vectors
//   io_bench read-model F.h5             read_model_file (svm-eval's load)
// Each prints "<what>: <seconds> s (<MB/s>)"; writes time the close and the fsync apart.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/dataset.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/model_file.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void report(const char* what, double seconds, double bytes) {
  std::printf("%-34s %7.3f s  %8.0f MB/s\n", what, seconds, bytes / 1e6 / seconds);
}

double fsync_file(const std::string& path) {
  const double t = now();
  int fd = open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  return now() - t;
}

// Photo-like pixels: a smooth random field plus a little noise, so that deflate level 1
// shrinks them about as much as it shrinks CIFAR-10 (random bytes would be stored, and
// inflating stored blocks costs nothing).
std::vector<uint8_t> photo_like(int64_t n, uint64_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(n) * 3072);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const double a = rng() % 256, b = (rng() % 64) - 32.0, c = (rng() % 64) - 32.0;
    for (int ch = 0; ch < 3; ++ch)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          double v = a + b * std::sin(0.2 * x + ch) + c * std::cos(0.17 * y) + double(rng() % 24);
          px[static_cast<size_t>(i) * 3072 + ch * 1024 + y * 32 + x] = uint8_t(std::min(255.0, std::max(0.0, v)));
        }
  }
  return px;
}

void make_dataset(const std::string& path) {
  cae::Hdf5Writer w(path);
  for (auto [split, n] : {std::pair<const char*, int64_t>{"train", 50000}, {"test", 10000}}) {
    cae::ImageSplit s;
    s.C = 3, s.H = 32, s.W = 32;
    const std::vector<uint8_t> pixels = photo_like(n, n);
    s.images.assign(pixels.begin(), pixels.end());
    s.labels.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s.labels[static_cast<size_t>(i)] = uint8_t(i % 10);
    cae::write_split(w, split, s);
  }
  w.set_attr("/", "format", cae::kDatasetFormat);
  w.set_attr("/", "format_version", int64_t{1});
  cae::write_class_names(w, cae::cifar10_class_names());
  w.close();
}

void read_dataset(const std::string& path) {
  double t = now();
  cae::DatasetReader data(path);
  const double open_s = now() - t;
  double bytes = 0;
  t = now();
  std::vector<uint8_t> px(1024 * 3072);
  for (const char* split : {"train", "test"}) {
    const int64_t n = data.count(split);
    for (int64_t r = 0; r < n; r += 1024) {
      const int64_t rows = std::min<int64_t>(1024, n - r);
      data.read_images(split, r, rows, px.data());
      bytes += double(rows) * 3072;
    }
  }
  report("dataset open+validate", open_s, 1);
  report("dataset read (1,024-row calls)", now() - t, bytes);
}

void write_features(const std::string& path, int64_t n_train) {
  const ae::Architecture arch = ae::Architecture::seed();
  const int64_t d = arch.latent_dim();
  std::vector<float> block(static_cast<size_t>(1024 * d));
  std::mt19937 rng(1);
  for (auto& v : block) v = float(rng() % 1000) * 0.01f + 0.5f;
  double bytes = 0;
  unlink(path.c_str());  // a fresh file, as AtomicOutput's temporary is (no truncate-on-rewrite flush)
  double t = now();
  ae::FeaturesWriter w(path, path, arch);
  for (auto [split, n] : {std::pair<const char*, int64_t>{"train", n_train}, {"test", 10000}}) {
    w.begin_split(split, n);
    for (int64_t r = 0; r < n; r += 1024) {
      const int64_t rows = std::min<int64_t>(1024, n - r);
      block[0] = float(r);  // every block differs
      w.write_rows(split, r, rows, block.data());
      bytes += double(rows) * double(d) * 4;
    }
    std::vector<uint8_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = uint8_t(i % 10);
    w.write_labels(split, labels);
  }
  const double rows_s = now() - t;
  t = now();
  w.finish(cae::Provenance{"ae-features", 1, "{}", {}}, {"cpu", 1.0, 1.0, cae::cifar10_class_names()});
  const double close_s = now() - t;
  report("features write_rows", rows_s, bytes);
  report("features finish (attrs+close)", close_s, bytes);
  report("features fsync", fsync_file(path), bytes);
}

void read_features(const std::string& path) {
  {  // the parts: zero-filling a buffer (page faults), then the bare HDF5 read into it
    cae::Hdf5Reader h(path);
    const cae::Shape shape = h.shape("/train/features");
    double t = now();
    std::vector<float> buf(shape[0] * shape[1]);
    report("  zero-fill of a train-sized buffer", now() - t, double(buf.size()) * 4);
    t = now();
    h.read_floats("/train/features", 0, shape[0], buf.data());  // float16 as ae-encode stores them
    report("  read_floats into that buffer", now() - t, double(buf.size()) * 4);
  }
  double t = now();
  ae::FeaturesReader r(path);
  for (const char* split : {"train", "test"}) {
    t = now();
    ae::FeatureSplit s = r.read(split, -1);
    const double sec = now() - t;
    report((std::string("features read ") + split).c_str(), sec, double(s.X.size()) * 4);
  }
}

void write_model(const std::string& path, int64_t n_sv) {
  svm::ModelFile f;
  const int D = 8192, kept = 2292, k = 10;
  f.scaler.mean.assign(D, 0.5);
  f.scaler.scale.assign(D, 2.0);
  f.feature_mask.assign(D, 0);
  for (int i = 0; i < kept; ++i) f.feature_mask[static_cast<size_t>(i) * 3] = 1;
  f.dropped_values.assign(D - kept, 0.25f);
  svm::Model& m = f.model;
  m.gamma = 1e-3;
  m.dim = kept;
  for (int c = 0; c < k; ++c) m.classes.push_back(c), m.n_support.push_back(int(n_sv / k + (c < n_sv % k)));
  m.support_vectors.resize(static_cast<size_t>(n_sv) * kept);
  std::mt19937 rng(2);
  for (auto& v : m.support_vectors) v = float(int(rng() % 20001) - 10000) * 1e-4f;
  m.support_indices.resize(static_cast<size_t>(n_sv));
  for (int64_t i = 0; i < n_sv; ++i) m.support_indices[static_cast<size_t>(i)] = i;
  m.dual_coef.assign(static_cast<size_t>((k - 1) * n_sv), 0.5);
  m.rho.assign(k * (k - 1) / 2, 0.1);
  f.n_train = 50000;
  f.class_names = cae::cifar10_class_names();
  unlink(path.c_str());
  double t = now();
  cae::Hdf5Writer w(path);
  svm::write_model_file(w, f);
  w.set_attr("/", "format", "svm-model");
  w.set_attr("/", "format_version", int64_t{1});
  w.close();
  const double bytes = double(m.support_vectors.size()) * 4;
  report("model write+close", now() - t, bytes);
  report("model fsync", fsync_file(path), bytes);
}

void read_model(const std::string& path) {
  const double t = now();
  svm::ModelFile f = svm::read_model_file(path);
  report("model read", now() - t, double(f.model.support_vectors.size()) * 4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: io_bench dataset|read-dataset|write-features|read-features|write-model|read-model FILE [N]\n");
    return 2;
  }
  const std::string what = argv[1], path = argv[2];
  try {
    if (what == "dataset") make_dataset(path);
    else if (what == "read-dataset") read_dataset(path);
    else if (what == "write-features") write_features(path, argc > 3 ? std::atoll(argv[3]) : 50000);
    else if (what == "read-features") read_features(path);
    else if (what == "write-model") write_model(path, argc > 3 ? std::atoll(argv[3]) : 42700);
    else if (what == "read-model") read_model(path);
    else return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
