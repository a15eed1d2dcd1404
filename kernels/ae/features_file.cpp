#include "kernels/ae/features_file.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "common/error.h"
#include "kernels/ae/data_parallel.h"

namespace ae {

FeaturesWriter::FeaturesWriter(const std::string& path, const std::string& display_name, const Architecture& arch,
                               FeatureDtype dtype)
    : w_(path, display_name),
      latent_shape_{arch.latent_channels(), arch.latent_height(), arch.latent_width()},
      dim_(arch.latent_dim()),
      dtype_(dtype) {}

void FeaturesWriter::begin_split(const std::string& split, int64_t n, const cae::ViewSet& views) {
  if (!split_views_.empty() && views.spec() != views_.spec())
    throw std::invalid_argument("FeaturesWriter: every split has the same views (" + views_.spec() + "), not " +
                                views.spec());
  views_ = views;
  std::vector<std::string>& paths = split_views_[split];
  paths.clear();
  for (const cae::ImageView& v : views.views()) {
    paths.push_back("/" + split + "/" + cae::features_dataset(v));
    if (dtype_ == FeatureDtype::float16)
      w_.create<cae::Half>(paths.back(), {uint64_t(n), uint64_t(dim_)});
    else
      w_.create<float>(paths.back(), {uint64_t(n), uint64_t(dim_)});
  }
}

void FeaturesWriter::write_rows(const std::string& split, int64_t row0, int64_t rows, const float* features,
                                int view) {
  const std::string& dataset = split_views_.at(split).at(size_t(view));
  if (dtype_ == FeatureDtype::float32) return w_.write_rows<float>(dataset, uint64_t(row0), uint64_t(rows), features);
  const size_t n = static_cast<size_t>(rows * dim_);
  if (halves_.size() < n) halves_.resize(n);
  const size_t bad = cae::floats_to_halves(features, halves_.data(), n);
  if (bad != n)
    fail_not_half(split, view, row0 + static_cast<int64_t>(bad) / dim_, static_cast<int64_t>(bad) % dim_,
                  features[bad]);
  w_.write_rows<cae::Half>(dataset, uint64_t(row0), uint64_t(rows), halves_.data());
}

void FeaturesWriter::write_rows(const std::string& split, int64_t row0, int64_t rows, const cae::Half* features,
                                int view) {
  if (dtype_ != FeatureDtype::float16)
    throw std::invalid_argument("FeaturesWriter: float16 rows for a float32 features file");
  w_.write_rows<cae::Half>(split_views_.at(split).at(size_t(view)), uint64_t(row0), uint64_t(rows), features);
}

void FeaturesWriter::fail_not_half(const std::string& split, int view, int64_t row, int64_t feature,
                                   float value) const {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
  cae::fail_file(w_.name(), split_views_.at(split).at(size_t(view)) + " row " + std::to_string(row) + " feature " +
                                std::to_string(feature) + " is " + text +
                                (std::isfinite(value)
                                     ? ", beyond float16's range (±65504): encode with --feature-dtype float32"
                                     : ", not a finite value"));
}

void FeaturesWriter::write_labels(const std::string& split, const std::vector<uint8_t>& labels) {
  w_.write("/" + split + "/labels", labels);
}

void FeaturesWriter::finish(const cae::Provenance& provenance, const Summary& s) {
  cae::write_provenance(w_, provenance);
  w_.set_attr("/", "latent_shape", latent_shape_);
  if (views_.flip()) w_.set_attr("/", "flip", int64_t{1});
  w_.set_attr("/", "views", views_.spec());
  w_.set_attr("/", "device", s.device);
  w_.set_attr("/", "seconds", s.seconds);
  w_.set_attr("/", "images_per_second", s.images_per_second);
  w_.set_attr("/", "class_names", s.class_names);
  w_.close();
}

void gather_rank_features(cae::GroupExchange& group, FeaturesWriter* w, const std::string& split, int64_t n, int batch,
                          std::vector<std::vector<float>>& kept) {
  cae::ByteWriter sent;
  for (std::vector<float>& view : kept) {
    sent.put_vector(view);
    view = {};
  }
  auto all = group.gather("features-" + split, sent.bytes());
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    const ImageRange theirs = encode_share(n, batch, r, group.world());
    cae::ByteReader in(all[static_cast<size_t>(r)], "rank " + std::to_string(r) + "'s " + split + " features");
    for (int view = 0; view < static_cast<int>(kept.size()); ++view) {
      const std::vector<float> f = in.get_vector<float>();
      if (f.size() != static_cast<size_t>(theirs.count * w->dim()))
        in.fail(std::to_string(f.size()) + " values for " + std::to_string(theirs.count) + " images");
      if (!f.empty()) w->write_rows(split, theirs.first, theirs.count, f.data(), view);
    }
    all[static_cast<size_t>(r)] = {};
  }
}

}  // namespace ae
