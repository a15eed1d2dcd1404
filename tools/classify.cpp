// classify: PNG/JPEG files, or the rows of a features file, → their classes, with a trained
// SVM (and for images its autoencoder; the seed's upload-and-classify demo as a command).
// Each image is decoded and converted to the model's input shape by convert_image — the
// function cifar-convert's image folders use — then encoded and classified in-process,
// exactly as ae-encode + svm-eval would: a PNG of a dataset image gets the class svm-eval
// gives that image. --features FILE classifies its rows instead (any features format,
// ae::read_features), named by their index. The class is the one-vs-one vote (as svm-eval's
// prediction); the listed scores are probabilities when the SVM has them (svm-fit
// --probability), else the votes. --reject: a one-class model marks the rows outside it.
// This file makes the rows; svm::run_classify (kernels/svm/classify_request.h) classifies them.
#include <algorithm>

#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/half.h"
#include "common/image_decode.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/view_set.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/features_reader.h"
#include "kernels/ae/model.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/classify_request.h"
#include "kernels/svm/evaluate.h"

namespace {

const cae::ToolInfo kInfo{"classify", "classify PNG/JPEG images (or features) with a trained autoencoder and SVM",
                          "classify --model data/run/model.h5 --svm data/run/svm.h5 --top 3 photo.jpg cat.png\n"
                          "  classify --svm data/run/svm.h5 --features data/run/features.h5 --split test "
                          "--reject data/run/oc.h5",
                          true, false, "give fewer images per call, or --device cpu"};

struct Options {
  std::string model, svm, features, split = "test", reject;
  std::vector<std::string> images;
  int top = 3;
  int batch_size = 64;
  std::string tta = "none";
  bool allow_mismatch = false;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model, "ae-model file (ae-train); for images");
  app.add_option("--svm", opt.svm, "svm-model file (svm-fit) trained on that model's features")->required();
  app.add_option("--features", opt.features,
                 "Classify the rows of this features file instead of images (ae-features, plain HDF5 or libsvm "
                 "text; docs/FORMATS.md); rows are named by their index");
  app.add_option("--split", opt.split, "Which split of an HDF5 --features file to classify");
  app.add_option("--reject", opt.reject,
                 "A one-class model (svm-fit --kind one-class) of the training features: a row outside it prints "
                 "as 'outside (CLASS)', and --json says \"inside\": false");
  app.add_option("--top", opt.top, "Classes listed per image, best first")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", opt.batch_size, "Images per encoder pass")->check(CLI::PositiveNumber);
  cae::add_view_set_option(app, "--tta", opt.tta,
                           "Test-time augmentation, as svm-eval --tta: average each image's decision values over "
                           "its views: flip (its mirror), shift:K (K shifted copies), flip,shift:K (and their "
                           "mirrors); with --features, the views ae-encode --flip / --shifts wrote");
  app.add_flag("--allow-mismatch", opt.allow_mismatch,
               "Use an SVM trained on another encoder's features (refused otherwise)");
  app.add_option("images", opt.images, "PNG or JPEG files (any size; converted to the model's input shape)");
  // Not the other tools' one summary line: one object per image, as the README says.
  app.get_option("--json")->description(
      "Print one JSON line per image (or row) on stdout: {\"file\" (or \"row\"),\"label\",\"class\",\"scores\"}");
}

// Images: decoded and converted first (a bad file fails the whole call), then encoded.
svm::ClassifyRows encode_images(const Options& opt, const svm::Classifier& clf, cae::Device device, const cae::ViewSet& tta) {
  ae::Encoder encoder(opt.model, device, 0, opt.batch_size);
  const ae::Architecture& arch = encoder.architecture();
  const int C = arch.input_channels(), H = arch.height(), W = arch.width();
  if (C != 1 && C != 3)
    cae::fail_file(opt.model, "takes " + std::to_string(C) + "-channel images; classify converts to gray (1) or RGB (3)");
  if (clf.n_features() != arch.latent_dim())
    cae::fail_file(opt.svm, "was trained on " + std::to_string(clf.n_features()) + " features, but " + opt.model +
                                " encodes " + std::to_string(arch.latent_dim()));
  // The SVM records the encoder of its training features: another model of the same shape
  // would classify without complaint, and wrongly.
  const std::string trained_on = clf.file().encoder_sha256;
  const std::string model_sha = trained_on.empty() && opt.reject.empty() ? "" : cae::sha256_file(opt.model);
  if (!trained_on.empty() && !opt.allow_mismatch && model_sha != trained_on)
    cae::fail_file(opt.model, "is not the model " + opt.svm + " was trained on (its features came from sha256 " +
                                  trained_on.substr(0, 12) + "…); pass that model, or --allow-mismatch");
  svm::ClassifyRows q;
  q.n = static_cast<int64_t>(opt.images.size());
  const int64_t image_dim = arch.image_dim(), latent = arch.latent_dim();
  std::vector<uint8_t> pixels(static_cast<size_t>(q.n * image_dim));
  for (int64_t i = 0; i < q.n; ++i) {
    const std::vector<uint8_t> px = cae::convert_image(cae::decode_image_file(opt.images[i]), C, H, W);
    std::copy(px.begin(), px.end(), pixels.begin() + i * image_dim);
  }
  q.X.resize(static_cast<size_t>(tta.count() * q.n * latent));
  // Each view's pixels made and encoded as ae-encode does, so a view's codes are its features.
  const std::vector<cae::ImageView> views = tta.views();
  for (size_t j = 0; j < views.size(); ++j)
    encoder.encode_view(pixels.data(), q.n, views[j], q.X.data() + j * q.n * latent, "input", 0);
  // An SVM fitted on float16 features (ae-encode's default) sees the codes as that file holds them.
  if (clf.file().features_dtype == "float16") {
    const size_t bad = cae::round_to_half(q.X.data(), q.X.size());
    if (bad != q.X.size())
      cae::fail_file(opt.model, "the code of " + opt.images[static_cast<size_t>(bad / latent) % opt.images.size()] +
                                    " is beyond float16's range (±65504), the precision " + opt.svm +
                                    " was fitted in");
  }
  q.origin = {opt.model, "its latent codes", static_cast<int>(latent), model_sha, clf.file().class_names};
  q.described = cae::strprintf("%lld images (%dx%dx%d", static_cast<long long>(q.n), C, H, W);
  q.device = "; " + encoder.describe();
  return q;
}

svm::ClassifyRows read_rows(const Options& opt, const svm::Classifier& clf, const cae::ViewSet& tta) {
  ae::FeatureRequest request;
  request.split = opt.split;
  request.ask_views(tta, "--tta");
  request.model_classes = clf.file().class_names;
  request.model_dim = clf.n_features();
  ae::FeatureRows rows = ae::read_features(opt.features, request);
  svm::ClassifyRows q;
  q.origin = {opt.features, rows.what, rows.split.dim, rows.encoder_sha256, rows.class_names};
  svm::check_rows_fit_model(clf, opt.svm, q.origin, opt.allow_mismatch);
  if (rows.n == 0) cae::fail_file(opt.features, rows.what + " has no rows");
  q.X = std::move(rows.split.X);
  q.n = rows.n;
  q.described = cae::strprintf("%lld rows of %s (", static_cast<long long>(q.n), opt.features.c_str()) + rows.what;
  return q;
}

void run(const Options& opt, const cae::CommonOptions& common) {
  if (opt.features.empty() == opt.images.empty()) throw cae::UsageError("give images, or --features FILE (not both)");
  if (opt.features.empty() && opt.model.empty()) throw cae::UsageError("images need --model (the autoencoder)");
  svm::ClassifyRequest req;
  req.svm = opt.svm;
  req.reject = opt.reject;
  if (opt.features.empty()) req.images = opt.images;
  req.common = common;
  req.tta = opt.tta;
  req.top = opt.top;
  req.allow_mismatch = opt.allow_mismatch;
  req.make_rows = [&](const svm::Classifier& clf, cae::Device device, const cae::ViewSet& tta) {
    return opt.features.empty() ? encode_images(opt, clf, device, tta) : read_rows(opt, clf, tta);
  };
  svm::run_classify(req);
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
