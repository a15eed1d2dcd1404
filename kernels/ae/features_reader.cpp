#include "kernels/ae/features_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "common/class_names.h"
#include "common/error.h"
#include "common/log.h"
#include "common/memory_limit.h"
#include "common/provenance.h"

namespace ae {

using cae::fail_file;

namespace {
// A plain file without class_names has the classes 0..its largest label. 65,536 classes
// would already be 2^31 class pairs, beyond any fit; a label beyond that is damage or a
// label of another kind (an id), not a class index.
constexpr int64_t kMaxUnnamedClasses = int64_t{1} << 16;
// Rows of labels read at a time where only their largest value is wanted: the table of a
// plain file's classes needs one pass over every label, never a copy of them all.
constexpr int64_t kLabelBlockRows = int64_t{1} << 20;
}  // namespace

FeaturesReader::FeaturesReader(const std::string& path) : h5_(path) {
  plain_ = !h5_.has_attr("/", "format");
  if (!plain_) h5_.require_format("ae-features", "ae-encode");
  else if (!has_split("train") && !has_split("test"))
    fail_file(path, "is neither an ae-features file (no 'format' attribute) nor a plain features file (no "
                    "/train/features or /test/features); docs/FORMATS.md describes both");
  if (!h5_.has_attr("/", "latent_shape")) return;
  latent_shape_ = h5_.attr_ints("/", "latent_shape");
  bool ok = latent_shape_.size() == 3;
  for (int64_t e : latent_shape_) ok = ok && e > 0 && e <= (int64_t{1} << 20);
  if (!ok) fail_file(path, "attribute latent_shape must be three positive extents [c,h,w]");
}

std::string FeaturesReader::encoder_sha256() const {
  if (plain_) return "";
  if (h5_.has_attr("/", "created_by") && h5_.attr_string("/", "created_by").rfind("ae-encode", 0) != 0) return "";
  const std::vector<std::string> inputs = cae::recorded_input_hashes(h5_);
  return inputs.empty() ? std::string() : inputs[0];
}

bool FeaturesReader::has_split(const std::string& split) const { return h5_.has("/" + split + "/features"); }

int64_t FeaturesReader::count(const std::string& split) const {
  if (!has_split(split)) fail_file(path(), "/" + split + "/features is missing (no '" + split + "' split in this file)");
  return static_cast<int64_t>(h5_.require("/" + split + "/features", {0, 0})[0]);
}

int FeaturesReader::dim(const std::string& split) const {
  count(split);
  uint64_t d = h5_.shape("/" + split + "/features")[1];
  if (d == 0 || d > static_cast<uint64_t>(std::numeric_limits<int>::max() / 2))
    fail_file(path(), "/" + split + "/features has " + std::to_string(d) + " features per row");
  if (!latent_shape_.empty()) {
    const uint64_t cells = static_cast<uint64_t>(latent_shape_[0] * latent_shape_[1] * latent_shape_[2]);
    if (cells != d)
      fail_file(path(), "/" + split + "/features has " + std::to_string(d) + " features per row, but latent_shape [" +
                            std::to_string(latent_shape_[0]) + "," + std::to_string(latent_shape_[1]) + "," +
                            std::to_string(latent_shape_[2]) + "] holds " + std::to_string(cells));
  }
  return static_cast<int>(d);
}

std::vector<std::string> FeaturesReader::class_names() const {
  if (h5_.has_attr("/", "class_names")) return cae::checked_class_names(h5_.attr_strings("/", "class_names"), path());
  int64_t n_classes = 10;
  if (plain_) {
    int64_t largest = 0;  // read_label_rows refuses negative labels
    std::vector<int64_t> block;
    for (const char* split : {"train", "test"}) {
      if (!has_split(split) || !h5_.has("/" + std::string(split) + "/labels")) continue;
      const int64_t rows = count(split);
      require_labels(split);
      block.resize(static_cast<size_t>(std::min(rows, kLabelBlockRows)));
      for (int64_t row0 = 0; row0 < rows; row0 += kLabelBlockRows) {
        const int64_t n = std::min(kLabelBlockRows, rows - row0);
        read_label_rows(split, row0, n, block.data());
        for (int64_t i = 0; i < n; ++i) {
          const int64_t label = block[static_cast<size_t>(i)];
          // The classes are 0..the largest label, a name each: a label's value sizes that table.
          if (label >= kMaxUnnamedClasses)
            fail_file(path(), "/" + std::string(split) + "/labels holds " + std::to_string(label) +
                                  ": without a class_names attribute the classes are 0..the largest label, at most " +
                                  std::to_string(kMaxUnnamedClasses) + " of them (give class_names)");
          largest = std::max(largest, label);
        }
      }
    }
    n_classes = largest + 1;
  }
  std::vector<std::string> names;
  for (int64_t c = 0; c < n_classes; ++c) names.push_back(std::to_string(c));
  return names;
}

void FeaturesReader::require_labels(const std::string& split) const {
  const std::string lab = "/" + split + "/labels";
  if (!h5_.has(lab)) fail_file(path(), lab + " is missing: the SVM needs labelled features");
  h5_.require(lab, {static_cast<uint64_t>(count(split))});
}

void FeaturesReader::read_label_rows(const std::string& split, int64_t row0, int64_t rows, int64_t* out) const {
  const std::string lab = "/" + split + "/labels";
  // Any integer type (HDF5 converts): ae-encode writes uint8, h5py users int64.
  h5_.read_rows_converting<int64_t>(lab, static_cast<uint64_t>(row0), static_cast<uint64_t>(rows), out);
  for (int64_t i = 0; i < rows; ++i)
    if (out[i] < 0)
      fail_file(path(), lab + "[" + std::to_string(row0 + i) + "] = " + std::to_string(out[i]) +
                            " is negative (labels are class indices 0, 1, ...)");
}

std::vector<int64_t> FeaturesReader::read_labels(const std::string& split, int64_t rows) const {
  require_labels(split);
  // The rows asked for, not the split's declared length: a few MB of deflated labels can
  // declare billions of rows (docs/RELIABILITY.md, round 4, class 3).
  cae::require_memory(path(), "/" + split + "/labels (" + std::to_string(rows) + " rows as int64)",
                      cae::saturating_product(static_cast<uint64_t>(rows), sizeof(int64_t)));
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  read_label_rows(split, 0, rows, labels.data());
  return labels;
}

namespace {
// "the features of the mirrored images (run ae-encode --flip)" for a view a file lacks.
std::string view_wanted(const cae::ImageView& view, int shifts) {
  const std::string shift_flag = " --shifts " + std::to_string(shifts);
  if (view.shift == 0) return "the features of the mirrored images (run ae-encode --flip)";
  if (!view.mirrored) return "the features of the shifted images (run ae-encode" + shift_flag + ")";
  return "the features of the shifted images' mirrors (run ae-encode" + shift_flag + " --flip)";
}
}  // namespace

std::optional<cae::ImageView> FeaturesReader::missing_view(const std::string& split, const cae::ViewSet& views) const {
  for (const cae::ImageView& v : views.views())
    if (!h5_.has("/" + split + "/" + cae::features_dataset(v))) return v;
  return std::nullopt;
}

void FeaturesReader::require_views(const std::string& split, const cae::ViewSet& views,
                                   const std::string& option) const {
  const std::optional<cae::ImageView> missing = missing_view(split, views);
  if (!missing) return;
  const std::string asker = option.empty() ? "reading views " + views.spec() : option;
  fail_file(path(), "/" + split + "/" + cae::features_dataset(*missing) + " is missing: " + asker + " needs " +
                        view_wanted(*missing, views.shifts()));
}

FeatureSplit FeaturesReader::read(const std::string& split, int64_t rows) const {
  return read_views(split, rows, cae::ViewSet());
}

FeatureSplit FeaturesReader::read_views(const std::string& split, int64_t rows, const cae::ViewSet& views,
                                        bool keep_float16) const {
  const std::string lab = "/" + split + "/labels";
  const int64_t n_all = count(split);
  const int d = dim(split);
  require_views(split, views, "");
  std::vector<std::string> datasets;
  for (const cae::ImageView& v : views.views()) {
    datasets.push_back("/" + split + "/" + cae::features_dataset(v));
    h5_.require(datasets.back(), {static_cast<uint64_t>(n_all), static_cast<uint64_t>(d)});
  }
  if (rows < 0 || rows > n_all) rows = n_all;
  // dtype and stored data checked before sizing the buffer
  for (const std::string& dataset : datasets) h5_.read_rows_converting<float>(dataset, 0, 0, nullptr);
  const bool float16 = std::all_of(datasets.begin(), datasets.end(),
                                   [&](const std::string& dataset) { return h5_.holds_float16(dataset); });
  const bool halves = keep_float16 && float16;
  // Everything this read holds at once, sized from the rows asked for, checked before any of
  // it is allocated: deflated chunks of a few MB can declare any shape that shape() accepts.
  const uint64_t n_views = static_cast<uint64_t>(views.count());
  const uint64_t values =
      cae::saturating_product(cae::saturating_product(static_cast<uint64_t>(rows), n_views), static_cast<uint64_t>(d));
  const uint64_t label_bytes =
      cae::saturating_product(static_cast<uint64_t>(rows), sizeof(int64_t) + n_views * sizeof(int32_t));
  const uint64_t held = cae::saturating_product(values, halves ? sizeof(cae::Half) : sizeof(float));
  const uint64_t most = std::numeric_limits<uint64_t>::max();
  std::string what = datasets[0];
  for (size_t v = 1; v < datasets.size(); ++v) what += ", " + datasets[v].substr(datasets[v].rfind('/') + 1);
  what += " (" + std::to_string(rows) + " rows";
  if (n_views > 1) what += " of each of " + std::to_string(n_views) + " views";
  what += " of " + std::to_string(d) + " features as " + (halves ? "float16" : "float32") + ", with their labels)";
  cae::require_memory(path(), what, held > most - label_bytes ? most : held + label_bytes);
  const std::vector<int64_t> labels = read_labels(split, rows);
  const int64_t n_classes = static_cast<int64_t>(class_names().size());
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= n_classes)
      fail_file(path(), lab + "[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + " is not a class 0.." +
                            std::to_string(n_classes - 1));
  FeatureSplit s;
  s.n = rows * views.count();
  s.dim = d;
  s.labels.reserve(static_cast<size_t>(s.n));
  for (int v = 0; v < views.count(); ++v)
    for (int64_t label : labels) s.labels.push_back(static_cast<int32_t>(label));
  s.float16 = float16;
  if (halves) {
    s.X16.resize(values);
    for (size_t v = 0; v < datasets.size(); ++v)
      read_checked(datasets[v], rows, d, s.X16.data() + int64_t(v) * rows * d);
    return s;
  }
  s.X.resize(values);
  for (size_t v = 0; v < datasets.size(); ++v) read_checked(datasets[v], rows, d, s.X.data() + int64_t(v) * rows * d);
  return s;
}

void FeatureSplit::widen() {
  if (X16.empty()) return;
  X.resize(X16.size());
  cae::halves_to_floats(X16.data(), X.data(), X16.size());
  cae::LargeVector<cae::Half>().swap(X16);
}

namespace {
// Whether a value is NaN or infinite, and which: floats, and binary16 by its bits (an
// all-ones exponent is Inf with a zero mantissa, NaN otherwise).
bool not_finite(float x) { return !std::isfinite(x); }
bool is_nan(float x) { return std::isnan(x); }
bool not_finite(cae::Half x) { return (x.bits & 0x7c00u) == 0x7c00u; }
bool is_nan(cae::Half x) { return not_finite(x) && (x.bits & 0x3ffu) != 0; }

// Fails "<path>: <dataset> row R feature F is NaN|infinite" at the first non-finite value of
// rows [rows, d] (NaN or Inf would poison every kernel value).
template <typename T>
void require_finite(const std::string& path, const std::string& dataset, const T* x, int64_t rows, int d) {
  const int64_t none = std::numeric_limits<int64_t>::max();
  int64_t bad = none;
#pragma omp parallel for schedule(static) reduction(min : bad) if (rows * d >= (int64_t{1} << 18))
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * d;
    for (int f = 0; f < d; ++f)
      if (not_finite(row[f])) {
        bad = std::min(bad, r * d + f);
        break;
      }
  }
  if (bad != none)
    fail_file(path, dataset + " row " + std::to_string(bad / d) + " feature " + std::to_string(bad % d) + " is " +
                        (is_nan(x[bad]) ? "NaN" : "infinite") + " (features must be finite)");
}
}  // namespace

void FeaturesReader::read_checked(const std::string& dataset, int64_t rows, int d, float* out) const {
  // float32 as stored and float16 widened as it is read (the parallel fast paths); float64
  // converted by HDF5 a buffer at a time, so the only full-size buffer is `out`. HDF5 turns
  // a float64 beyond float32's range into ±Inf: refused below.
  h5_.read_floats(dataset, 0, static_cast<uint64_t>(rows), out);
  require_finite(path(), dataset, out, rows, d);
}

void FeaturesReader::read_checked(const std::string& dataset, int64_t rows, int d, cae::Half* out) const {
  h5_.read_halves(dataset, 0, static_cast<uint64_t>(rows), out);
  require_finite(path(), dataset, out, rows, d);
}

namespace {

FeatureRows read_libsvm_rows(const std::string& path, const FeatureRequest& request, int64_t limit) {
  const cae::ViewSet& views = request.views;
  if (views.count() > 1)
    throw cae::UsageError(request.views_option + " needs an HDF5 features file with /" + request.split + "/" +
                          cae::features_dataset(views.views()[1]) + " (ae-encode --flip / --shifts)");
  cae::LibsvmData d = cae::read_libsvm_data(path, request.model_classes, request.model_dim);
  FeatureRows rows;
  rows.format = FeaturesFormat::libsvm_text;
  rows.available = d.n;
  rows.n = limit > 0 ? std::min(limit, d.n) : d.n;
  // The copy is held beside the parsed matrix until this returns.
  cae::require_memory(path, "its first " + std::to_string(rows.n) + " rows of " + std::to_string(d.dim) +
                                " features as float32",
                      cae::saturating_product(
                          cae::saturating_product(static_cast<uint64_t>(rows.n), static_cast<uint64_t>(d.dim)),
                          sizeof(float)));
  rows.split.X.assign(d.X.begin(), d.X.begin() + rows.n * d.dim);
  rows.split.labels.assign(d.labels.begin(), d.labels.begin() + rows.n);
  rows.split.n = rows.n;
  rows.split.dim = d.dim;
  rows.class_names = std::move(d.class_names);
  return rows;
}

void warn_beyond_limit(const std::string& path, const FeatureRequest& request, int64_t available) {
  if (request.limit_option.empty() || request.limit <= available) return;
  const std::string rows = request.split == "train" ? "training" : "'" + request.split + "'";
  cae::log_warn("%s %lld is larger than the %lld %s rows of %s; using all %lld", request.limit_option.c_str(),
                static_cast<long long>(request.limit), static_cast<long long>(available), rows.c_str(), path.c_str(),
                static_cast<long long>(available));
}

}  // namespace

FeatureRows read_features(const std::string& path, const FeatureRequest& request) {
  const int64_t limit = std::max<int64_t>(request.limit, 0);
  if (cae::is_libsvm_text(path)) {
    FeatureRows rows = read_libsvm_rows(path, request, limit);
    warn_beyond_limit(path, request, rows.available);
    return rows;
  }
  const FeaturesReader reader(path);  // (refuses what is not a regular HDF5 file first)
  const std::string& split = request.split;
  FeatureRows rows;
  rows.format = reader.plain() ? FeaturesFormat::plain : FeaturesFormat::ae_features;
  rows.available = reader.count(split);
  warn_beyond_limit(path, request, rows.available);
  rows.n = limit > 0 ? std::min(limit, rows.available) : rows.available;
  reader.require_views(split, request.views, request.views_option);
  if (rows.n > 0) rows.split = reader.read_views(split, rows.n, request.views, request.keep_float16);
  rows.split.dim = reader.dim(split);
  rows.class_names = reader.class_names();
  rows.encoder_sha256 = reader.encoder_sha256();
  rows.what = "/" + split + "/features";
  return rows;
}

FeatureRows read_training_rows(const std::string& path, int64_t limit, const cae::ViewSet& views,
                               bool keep_float16) {
  FeatureRequest request;
  request.keep_float16 = keep_float16;
  request.limit = limit;
  request.limit_option = "--train-limit";
  request.ask_views(views, "--augment");
  return read_features(path, request);
}

}  // namespace ae
