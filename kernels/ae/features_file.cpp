#include "kernels/ae/features_file.h"

#include "kernels/ae/data_parallel.h"

namespace ae {

FeaturesWriter::FeaturesWriter(const std::string& path, const std::string& display_name, const Architecture& arch)
    : w_(path, display_name),
      latent_shape_{arch.latent_channels(), arch.latent_height(), arch.latent_width()},
      dim_(arch.latent_dim()) {}

namespace {
std::string features_path(const std::string& split, bool flipped) {
  return "/" + split + (flipped ? "/features_flip" : "/features");
}
}  // namespace

void FeaturesWriter::begin_split(const std::string& split, int64_t n, bool flipped) {
  w_.create<float>(features_path(split, false), {uint64_t(n), uint64_t(dim_)});
  if (flipped) w_.create<float>(features_path(split, true), {uint64_t(n), uint64_t(dim_)});
  flipped_ = flipped_ || flipped;
}

void FeaturesWriter::write_rows(const std::string& split, int64_t row0, int64_t rows, const float* features,
                                bool flipped) {
  w_.write_rows<float>(features_path(split, flipped), uint64_t(row0), uint64_t(rows), features);
}

void FeaturesWriter::write_labels(const std::string& split, const std::vector<uint8_t>& labels) {
  w_.write("/" + split + "/labels", labels);
}

void FeaturesWriter::finish(const cae::Provenance& provenance, const Summary& s) {
  cae::write_provenance(w_, provenance);
  w_.set_attr("/", "latent_shape", latent_shape_);
  if (flipped_) w_.set_attr("/", "flip", int64_t{1});
  w_.set_attr("/", "device", s.device);
  w_.set_attr("/", "seconds", s.seconds);
  w_.set_attr("/", "images_per_second", s.images_per_second);
  w_.set_attr("/", "class_names", s.class_names);
  w_.close();
}

void gather_rank_features(cae::GroupExchange& group, FeaturesWriter* w, const std::string& split, int64_t n, int batch,
                          bool flip, std::vector<float> (&kept)[2]) {
  cae::ByteWriter sent;
  sent.put_vector(kept[0]);
  sent.put_vector(kept[1]);
  kept[0] = {};
  kept[1] = {};
  auto all = group.gather("features-" + split, sent.bytes());
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    const ImageRange theirs = encode_share(n, batch, r, group.world());
    cae::ByteReader in(all[static_cast<size_t>(r)], "rank " + std::to_string(r) + "'s " + split + " features");
    for (bool flipped : {false, true}) {
      const std::vector<float> f = in.get_vector<float>();
      if (f.size() != static_cast<size_t>((flipped && !flip ? 0 : theirs.count) * w->dim()))
        in.fail(std::to_string(f.size()) + " values for " + std::to_string(theirs.count) + " images");
      if (!f.empty()) w->write_rows(split, theirs.first, theirs.count, f.data(), flipped);
    }
    all[static_cast<size_t>(r)] = {};
  }
}

}  // namespace ae
