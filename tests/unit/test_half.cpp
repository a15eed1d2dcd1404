// float16 storage (common/half.h): the conversions against a reference written from the
// standard's definition, the features file that stores them (the type h5py reads as float16),
// and the SVM model whose support vectors follow the features' precision.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/preprocess.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;

// binary16 from its definition: (−1)^s · 2^(e−15) · (1 + m/1024), or 2^−14 · m/1024 when e = 0.
double half_value(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

// The binary16 nearest to x (ties to the even significand), found by bisection over the
// ordered positive codes; beyond 65504 the next "code" is Inf, worth 65536 for the tie.
uint16_t reference_half(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  uint16_t lo = 0, hi = 0x7c00;  // half_value(lo) <= a < value(hi), value(0x7c00) taken as 65536
  auto value = [](uint16_t h) { return h == 0x7c00 ? 65536.0 : half_value(h); };
  if (a >= 65536.0) return sign | 0x7c00;
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - value(lo), above = value(hi) - a;
  const uint16_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | pick;
}

TEST(Half, EveryCodeWidensToItsValueAndRoundsBackToItself) {
  std::vector<cae::Half> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h].bits = static_cast<uint16_t>(h);
  std::vector<float> wide(65536 * 8);  // repeated, so that the parallel path runs too
  std::vector<cae::Half> many(wide.size());
  for (size_t i = 0; i < many.size(); ++i) many[i] = all[i % 65536];
  cae::halves_to_floats(many.data(), wide.data(), many.size());
  int checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = ((h >> 10) & 31) == 31 && (h & 1023);
    const float v = cae::half_bits_to_float(static_cast<uint16_t>(h));
    if (nan) {
      EXPECT_TRUE(std::isnan(v) && std::isnan(wide[h])) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(v), half_value(static_cast<uint16_t>(h))) << h;
    ASSERT_EQ(wide[h + 65536 * 5], v) << h;
    ASSERT_EQ(cae::float_to_half_bits(v), h) << h;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 1023);
}

TEST(Half, FloatsRoundToTheNearestHalfWithTiesToEven) {
  std::vector<float> x;
  // Every midpoint between neighbouring finite codes (exact floats: the ties), and a quarter
  // step either side of it, over the whole range, subnormals and both signs included.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float a = static_cast<float>(half_value(h)), b = static_cast<float>(half_value(h + 1));
    const float mid = (a + b) / 2, quarter = (b - a) / 4;
    for (float v : {mid, mid - quarter, mid + quarter}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  // Random magnitudes from 2^-30 to 2^17.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-30, 17), unit(0, 1);
  for (int i = 0; i < 200000; ++i)
    x.push_back(static_cast<float>((unit(rng) < 0.5 ? -1 : 1) * std::exp2(exponent(rng))));
  std::vector<cae::Half> bulk(x.size());
  const size_t bad = cae::floats_to_halves(x.data(), bulk.data(), x.size());
  size_t first_beyond = x.size();
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t want = reference_half(x[i]);
    ASSERT_EQ(cae::float_to_half_bits(x[i]), want) << x[i];
    ASSERT_EQ(bulk[i].bits, want) << x[i];
    if ((want & 0x7c00) == 0x7c00 && first_beyond == x.size()) first_beyond = i;
  }
  EXPECT_LT(first_beyond, x.size());  // the random magnitudes reach beyond 65520
  EXPECT_EQ(bad, first_beyond);
  std::vector<float> rounded = x;
  EXPECT_EQ(cae::round_to_half(rounded.data(), rounded.size()), first_beyond);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(static_cast<double>(rounded[i]), half_value(reference_half(x[i]))) << x[i];
}

TEST(Half, TheFirstValueWithoutAFiniteHalfIsFound) {
  const float largest_below = std::nextafter(cae::kHalfOverflow, 0.0f);
  std::vector<float> x(1 << 20, 1.5f);  // large enough for every core
  x[1000] = largest_below;
  x[2000] = -largest_below;
  std::vector<cae::Half> h(x.size());
  EXPECT_EQ(cae::floats_to_halves(x.data(), h.data(), x.size()), x.size());
  EXPECT_EQ(h[1000].bits, 0x7bff);  // 65504
  EXPECT_EQ(h[2000].bits, 0xfbff);
  for (const float beyond : {cae::kHalfOverflow, -70000.0f, INFINITY, NAN}) {
    x[777777] = beyond;
    x[900000] = beyond;
    EXPECT_EQ(cae::floats_to_halves(x.data(), h.data(), x.size()), size_t{777777}) << beyond;
    EXPECT_EQ(cae::floats_to_halves(x.data() + 777770, h.data(), 7), size_t{7}) << beyond;  // none: n
    EXPECT_EQ(cae::floats_to_halves(x.data() + 777770, h.data(), 8), size_t{7}) << beyond;  // in a vector of 8
    EXPECT_EQ(cae::floats_to_halves(x.data() + 777773, h.data(), 5), size_t{4}) << beyond;  // the scalar tail
  }
}

// A features file of n rows of the seed model's width, written with `dtype`.
std::vector<float> write_features(const std::string& path, int64_t n, ae::FeatureDtype dtype, unsigned seed) {
  const ae::Architecture arch = ae::Architecture::seed();
  const int64_t d = arch.latent_dim();
  std::mt19937 rng(seed);
  std::lognormal_distribution<float> code(0.0f, 1.5f);  // ReLU codes: positive, a few large
  std::vector<float> x(static_cast<size_t>(n * d));
  for (float& v : x) v = code(rng);
  ae::FeaturesWriter w(path, path, arch, dtype);
  w.begin_split("train", n);
  for (int64_t r = 0; r < n; r += 100) w.write_rows("train", r, std::min<int64_t>(100, n - r), x.data() + r * d);
  w.write_labels("train", std::vector<uint8_t>(static_cast<size_t>(n), 3));
  w.finish(cae::Provenance{"ae-features", 1, "{}", {}}, {"cpu", 1.0, 1.0, {"0", "1", "2", "3"}});
  return x;
}

TEST(Hdf5Half, FeaturesAreStoredAsH5pysFloat16AndReadBackAsTheirRounding) {
  TempDir tmp;
  const std::string f16 = tmp.file("f16.h5"), f32 = tmp.file("f32.h5");
  const std::vector<float> x = write_features(f16, 1100, ae::FeatureDtype::float16, 1);
  EXPECT_EQ(write_features(f32, 1100, ae::FeatureDtype::float32, 1), x);
  {
    const hid_t file = H5Fopen(f16.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(file, "/train/features", H5P_DEFAULT);
    const hid_t type = H5Dget_type(ds);
    EXPECT_EQ(H5Tget_size(type), 2u);
    EXPECT_GT(H5Tequal(type, cae::ieee_f16_type()), 0);
    size_t spos, epos, esize, mpos, msize;  // h5py's IEEE_F16LE
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    EXPECT_EQ(std::vector<size_t>({spos, epos, esize, mpos, msize}), std::vector<size_t>({15, 10, 5, 0, 10}));
    EXPECT_EQ(H5Tget_ebias(type), 15u);
    EXPECT_EQ(H5Tget_order(type), H5T_ORDER_LE);
    H5Tclose(type);
    H5Dclose(ds);
    H5Fclose(file);
  }
  std::vector<float> rounded = x;
  ASSERT_EQ(cae::round_to_half(rounded.data(), rounded.size()), rounded.size());
  EXPECT_NE(rounded, x);
  const ae::FeatureSplit half = ae::FeaturesReader(f16).read("train", -1);
  EXPECT_TRUE(half.float16);
  EXPECT_TRUE(std::equal(half.X.begin(), half.X.end(), rounded.begin()));
  const ae::FeatureSplit full = ae::FeaturesReader(f32).read("train", 600);  // a limit: part of a block
  EXPECT_FALSE(full.float16);
  EXPECT_TRUE(std::equal(full.X.begin(), full.X.end(), x.begin()));
  EXPECT_EQ(full.X.size(), static_cast<size_t>(600 * 8192));
}

// svm-fit's single fit keeps float16 rows as stored (FeatureRequest::keep_float16): the same
// values as the widening read, in half the bytes; widen() makes the widening read's floats.
TEST(Hdf5Half, Float16RowsKeptAsStoredAreTheWideningReadsValues) {
  TempDir tmp;
  const std::string f16 = tmp.file("f16.h5"), f32 = tmp.file("f32.h5");
  write_features(f16, 1100, ae::FeatureDtype::float16, 2);
  write_features(f32, 300, ae::FeatureDtype::float32, 2);
  const ae::FeatureRows widened = ae::read_training_rows(f16, 700, cae::ViewSet());
  ae::FeatureRows kept = ae::read_training_rows(f16, 700, cae::ViewSet(), /*keep_float16=*/true);
  ASSERT_EQ(widened.split.X.size(), static_cast<size_t>(700 * 8192));
  EXPECT_TRUE(kept.split.X.empty());
  ASSERT_EQ(kept.split.X16.size(), widened.split.X.size());
  EXPECT_TRUE(kept.split.float16);
  EXPECT_EQ(kept.split.labels, widened.split.labels);
  EXPECT_EQ(kept.split.n, 700);
  for (size_t i = 0; i < widened.split.X.size(); ++i)
    ASSERT_EQ(cae::half_bits_to_float(kept.split.X16[i].bits), widened.split.X[i]) << i;
  kept.split.widen();
  EXPECT_TRUE(kept.split.X16.empty());
  EXPECT_TRUE(std::equal(kept.split.X.begin(), kept.split.X.end(), widened.split.X.begin()));
  // float32 rows are read as floats whatever is asked.
  const ae::FeatureRows full = ae::read_training_rows(f32, 0, cae::ViewSet(), true);
  EXPECT_TRUE(full.split.X16.empty());
  EXPECT_EQ(full.split.X.size(), static_cast<size_t>(300 * 8192));
  EXPECT_FALSE(full.split.float16);
}

// A NaN or Inf in float16 rows kept as stored is named as the widening read names it.
TEST(Hdf5Half, ANonFiniteFeatureKeptAsFloat16IsNamedAsWhenWidened) {
  TempDir tmp;
  const int64_t n = 40;
  const int dim = 6;
  for (const uint16_t bad : {uint16_t{0x7e00}, uint16_t{0xfc00}, uint16_t{0x7c01}}) {  // NaN, -Inf, a signalling NaN
    std::vector<cae::Half> x(static_cast<size_t>(n * dim));
    for (size_t i = 0; i < x.size(); ++i) x[i].bits = cae::float_to_half_bits(0.25f * float(i % 9));
    x[static_cast<size_t>(31 * dim + 4)].bits = bad;
    x[static_cast<size_t>(35 * dim + 1)].bits = 0x7c00;  // a later one is not the one named
    const std::string path = tmp.file("bad" + std::to_string(bad) + ".h5");
    {
      cae::Hdf5Writer w(path);
      w.write("/train/features", x.data(), {static_cast<uint64_t>(n), static_cast<uint64_t>(dim)});
      w.write("/train/labels", std::vector<int64_t>(static_cast<size_t>(n), 1));
      w.close();
    }
    std::string widened_error, kept_error;
    try {
      ae::read_training_rows(path, 0, cae::ViewSet());
    } catch (const std::runtime_error& e) {
      widened_error = e.what();
    }
    try {
      ae::read_training_rows(path, 0, cae::ViewSet(), /*keep_float16=*/true);
    } catch (const std::runtime_error& e) {
      kept_error = e.what();
    }
    EXPECT_EQ(kept_error, widened_error);
    EXPECT_EQ(kept_error, path + ": /train/features row 31 feature 4 is " + (bad == 0xfc00 ? "infinite" : "NaN") +
                              " (features must be finite)");
  }
}

// The scaler and a GPU-prepared fit's support vectors made from float16 rows are those of
// their floats, bit for bit.
TEST(Hdf5Half, TheScalerAndSupportVectorsOfFloat16RowsAreThoseOfTheirFloats) {
  const int64_t n = 1500;
  const int dim = 700;  // three column blocks of the scaler, the last partial
  std::mt19937 rng(5);
  std::lognormal_distribution<float> code(0.0f, 1.5f);
  std::vector<float> X(static_cast<size_t>(n * dim));
  for (float& v : X) v = rng() % 3 == 0 ? 0.0f : code(rng);
  for (int64_t r = 0; r < n; ++r) X[static_cast<size_t>(r * dim + 9)] = 2.0f;  // a constant feature
  std::vector<cae::Half> X16(X.size());
  ASSERT_EQ(cae::floats_to_halves(X.data(), X16.data(), X.size()), X.size());
  cae::halves_to_floats(X16.data(), X.data(), X.size());
  const svm::Scaler want = svm::fit_standard_scaler(X.data(), n, dim);
  const svm::Scaler got = svm::fit_standard_scaler(X16.data(), n, dim);
  EXPECT_EQ(got.mean, want.mean);
  EXPECT_EQ(got.scale, want.scale);
  std::vector<float> scaled = X;
  const svm::PreparedRows prepared = svm::prepare_training_rows(scaled.data(), n, dim, want);
  ASSERT_EQ(prepared.kept, dim - 1);
  const std::vector<int64_t> some = {n - 1, 0, 77, n / 2};
  std::vector<float> from_floats(some.size() * static_cast<size_t>(prepared.kept)), from_halves(from_floats.size());
  svm::scaled_kept_rows(prepared, X.data(), dim, some.data(), 4, from_floats.data());
  svm::scaled_kept_rows(prepared, X16.data(), dim, some.data(), 4, from_halves.data());
  EXPECT_EQ(from_halves, from_floats);
  for (size_t v = 0; v < some.size(); ++v)
    EXPECT_TRUE(std::equal(from_halves.begin() + static_cast<std::ptrdiff_t>(v * prepared.kept),
                           from_halves.begin() + static_cast<std::ptrdiff_t>((v + 1) * prepared.kept),
                           scaled.begin() + static_cast<std::ptrdiff_t>(some[v] * prepared.kept)));
}

TEST(Hdf5Half, ACodeBeyondFloat16sRangeNamesItsRowAndTheOption) {
  TempDir tmp;
  const ae::Architecture arch = ae::Architecture::seed();
  std::vector<float> x(static_cast<size_t>(4 * arch.latent_dim()), 0.5f);
  x[static_cast<size_t>(3 * arch.latent_dim() + 5)] = 70000.0f;
  ae::FeaturesWriter w(tmp.file("f.h5"), "out.h5", arch);
  w.begin_split("test", 10);
  try {
    w.write_rows("test", 6, 4, x.data());
    FAIL() << "a code beyond float16's range was written";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "out.h5: /test/features row 9 feature 5 is 70000, beyond float16's range (±65504): encode with "
              "--feature-dtype float32");
  }
}

TEST(SvmModelFile, Float16FeaturesKeepFloat16SupportVectorsThatPredictAsSaved) {
  TempDir tmp;
  const int64_t n = 300, n_test = 80;
  const int dim = 12;
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> X(static_cast<size_t>((n + n_test) * dim));
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n + n_test; ++i)
    for (int f = 0; f < dim; ++f) X[i * dim + f] = 3.0f + noise(rng) + (f == i % 3 ? 1.5f : 0.0f);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(i % 3);
  cae::round_to_half(X.data(), X.size());  // as a float16 features file gives them
  std::vector<float> train(X.begin(), X.begin() + n * dim);
  svm::ClassifierParams params;
  params.log_summary = false;
  svm::Classifier clf;
  clf.fit(train.data(), y.data(), n, dim, params, cae::Device::cpu);
  const cae::LargeVector<float> fitted = clf.model().support_vectors;
  clf.keep_float16();
  EXPECT_EQ(clf.file().features_dtype, "float16");
  const cae::LargeVector<float>& kept = clf.model().support_vectors;
  ASSERT_EQ(kept.size(), fitted.size());
  bool changed = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    ASSERT_EQ(kept[i], cae::half_bits_to_float(cae::float_to_half_bits(fitted[i])));
    const double change = std::fabs(double(kept[i]) - fitted[i]);  // half a unit in the last place
    ASSERT_LE(change, std::max(std::ldexp(std::fabs(double(fitted[i])), -11), std::ldexp(1.0, -25))) << fitted[i];
    changed |= change > 0;
  }
  EXPECT_TRUE(changed);  // the scaled values were not float16 values
  const std::string path = tmp.file("svm.h5");
  {
    cae::Hdf5Writer w(path);
    w.set_attr("/", "format", "svm-model");
    w.set_attr("/", "format_version", int64_t{1});
    clf.save(w);
    w.close();
  }
  EXPECT_TRUE(cae::Hdf5Reader(path).holds_float16("/svm/support_vectors"));
  const svm::Classifier loaded = svm::Classifier::load(path);
  EXPECT_EQ(loaded.file().features_dtype, "float16");
  EXPECT_EQ(loaded.model().support_vectors, kept);
  std::vector<float> a(X.begin() + n * dim, X.end()), b = a;
  EXPECT_EQ(loaded.decision_values(a.data(), n_test), clf.decision_values(b.data(), n_test));
}

}  // namespace
