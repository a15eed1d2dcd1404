// classify: PNG/JPEG files → their classes, with a trained autoencoder and SVM (the seed's
// upload-and-classify demo as a command). Each image is decoded and converted to the
// model's input shape by convert_image — the function cifar-convert's image folders use —
// then encoded and classified in-process, exactly as ae-encode + svm-eval would: a PNG of a
// dataset image gets the class svm-eval gives that image. The class is the one-vs-one vote
// (as svm-eval's prediction); the listed scores are probabilities when the SVM has them
// (svm-fit --probability), else the votes.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/error.h"
#include "common/escape.h"
#include "common/image_decode.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sha256.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/model.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/evaluate.h"

namespace {

const cae::ToolInfo kInfo{"classify", "classify PNG/JPEG images with a trained autoencoder and SVM",
                          "classify --model data/run/model.h5 --svm data/run/svm.h5 --top 3 photo.jpg cat.png", true,
                          false, "give fewer images per call, or --device cpu"};

struct Options {
  std::string model, svm;
  std::vector<std::string> images;
  int top = 3;
  int batch_size = 64;
  std::string tta = "none";
  bool allow_mismatch = false;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model, "ae-model file (ae-train)")->required();
  app.add_option("--svm", opt.svm, "svm-model file (svm-fit) trained on that model's features")->required();
  app.add_option("--top", opt.top, "Classes listed per image, best first")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", opt.batch_size, "Images per encoder pass")->check(CLI::PositiveNumber);
  app.add_option("--tta", opt.tta, "Test-time augmentation, as svm-eval --tta: none, or flip (average with the mirror)")
      ->check(CLI::IsMember({"none", "flip"}));
  app.add_flag("--allow-mismatch", opt.allow_mismatch,
               "Use an SVM trained on another encoder's features (refused otherwise)");
  app.add_option("images", opt.images, "PNG or JPEG files (any size; converted to the model's input shape)")
      ->required();
  // Not the other tools' one summary line: one object per image, as the README says.
  app.get_option("--json")->description(
      "Print one JSON line per image on stdout: {\"file\",\"label\",\"class\",\"scores\"}");
}

void run(const Options& opt, const cae::CommonOptions& common) {
  const cae::Device device = cae::resolve_device(common.device);
  if (device == cae::Device::gpu) cae::cublas::preload();  // loads while the inputs are read
  ae::Encoder encoder(opt.model, device, 0, opt.batch_size);
  const ae::Architecture& arch = encoder.architecture();
  const int C = arch.input_channels(), H = arch.height(), W = arch.width();
  if (C != 1 && C != 3)
    cae::fail_file(opt.model, "takes " + std::to_string(C) + "-channel images; classify converts to gray (1) or RGB (3)");
  const svm::Classifier clf = svm::Classifier::load(opt.svm);
  svm::require_classifier(clf, opt.svm);
  if (clf.n_features() != arch.latent_dim())
    cae::fail_file(opt.svm, "was trained on " + std::to_string(clf.n_features()) + " features, but " + opt.model +
                                " encodes " + std::to_string(arch.latent_dim()));
  // The SVM records the encoder of its training features: another model of the same shape
  // would classify without complaint, and wrongly.
  const std::string trained_on = clf.file().encoder_sha256;
  if (!trained_on.empty() && !opt.allow_mismatch && cae::sha256_file(opt.model) != trained_on)
    cae::fail_file(opt.model, "is not the model " + opt.svm + " was trained on (its features came from sha256 " +
                                  trained_on.substr(0, 12) + "…); pass that model, or --allow-mismatch");
  const std::vector<std::string>& names = clf.file().class_names;
  auto class_name = [&](int label) {
    return label >= 0 && size_t(label) < names.size() ? names[size_t(label)] : std::to_string(label);
  };

  // Every image is decoded before anything is printed: a bad file fails the whole call.
  const int64_t n = static_cast<int64_t>(opt.images.size());
  const int64_t image_dim = arch.image_dim();
  std::vector<uint8_t> pixels(static_cast<size_t>(n * image_dim));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<uint8_t> px = cae::convert_image(cae::decode_image_file(opt.images[i]), C, H, W);
    std::copy(px.begin(), px.end(), pixels.begin() + i * image_dim);
  }

  // --tta flip, as svm-eval --tta flip: the n images, then their n mirrors; each image's
  // decision values are the mean of its two views'.
  const int views = opt.tta == "flip" ? 2 : 1;
  const int64_t latent = arch.latent_dim();
  std::vector<float> features(static_cast<size_t>(views * n * latent));
  encoder.encode(pixels.data(), n, features.data(), views == 2 ? features.data() + n * latent : nullptr, "input", 0);
  const std::vector<double> dec = svm::average_views(clf.decision_values(features.data(), views * n, device), n,
                                                     clf.model().n_pairs(), views);
  const std::vector<int32_t> pred = clf.vote(dec, n);

  const bool by_prob = clf.has_probability();
  const std::vector<std::vector<svm::ClassScore>> ranks = svm::ranked_classes(clf, dec, n);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<svm::ClassScore> ranked = ranks[i];
    ranked.resize(std::min(ranked.size(), size_t(opt.top)));
    if (common.json) {
      std::string scores = "[";
      for (size_t j = 0; j < ranked.size(); ++j)
        scores += (j ? "," : "") + cae::JsonObject()
                                       .add("class", class_name(ranked[j].label))
                                       .add("label", ranked[j].label)
                                       .add(by_prob ? "probability" : "votes", ranked[j].value)
                                       .str();
      cae::emit_json(common, cae::JsonObject()
                                 .add("file", opt.images[i])
                                 .add("label", pred[i])
                                 .add("class", class_name(pred[i]))
                                 .add_raw("scores", scores + "]")
                                 .str());
      continue;
    }
    std::string line = opt.images[i] + ": " + class_name(pred[i]) + "  (";
    for (size_t j = 0; j < ranked.size(); ++j)
      line += (j ? ", " : "") + class_name(ranked[j].label) + " " +
              (by_prob ? cae::strprintf("%.3f", ranked[j].value) : cae::strprintf("%.0f votes", ranked[j].value));
    printf("%s)\n", cae::escape_controls(line).c_str());  // file and class names come from outside
  }
  fflush(stdout);
  cae::log_info("classified %lld images (%dx%dx%d; %s; %s)", static_cast<long long>(n), C, H, W,
                by_prob ? "probabilities" : "one-vs-one votes", encoder.describe().c_str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
