// ae-encode: a trained autoencoder's latent codes (latent_dim = c·h·w of the model's
// architecture, 8,192 for the seed model) for every image of a dataset, streamed chunk by
// chunk so memory stays small, the reading and writing overlapped with the encoding
// (ae::run_encoding, kernels/ae/encoding.h; docs/FORMATS.md, "ae-features"). --flip and --shifts K also
// encode other views of every image (mirrored left to right, shifted: cae::ViewSet) into
// /<split>/features_flip, features_shift1, ..., for svm-fit --augment and svm-eval --tta.
#include "common/cli.h"
#include "common/group.h"
#include "common/json.h"
#include "common/phases.h"
#include "common/view_set.h"
#include "kernels/ae/encoding.h"

namespace {

const cae::ToolInfo kInfo{"ae-encode", "encode images with a trained autoencoder (its latent code per image)",
                          "ae-encode --model data/run/model.h5 --data data/cifar10.h5 -o data/run/features.h5", true,
                          true, "try a smaller --batch-size"};

struct Options {
  std::string model;
  std::string data;
  int batch_size = 256;
  std::string splits = "train,test";
  int threads = 0;
  bool flip = false;
  int shifts = 0;
  std::string dtype = "float16";
  cae::GroupOptions group;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model, "ae-model file (ae-train)")->required();
  app.add_option("--data", opt.data, "image-dataset file (cifar-convert); its image shape must be the model's")->required();
  app.add_option("--batch-size", opt.batch_size, "Images per encoder pass")->check(CLI::PositiveNumber);
  app.add_option("--split", opt.splits, "Splits to encode, comma-separated: train, test");
  cae::add_threads_option(app, opt.threads);
  app.add_flag("--flip", opt.flip,
               "Also encode every image mirrored left to right (/<split>/features_flip: for svm-fit --augment "
               "flip and svm-eval --tta flip)");
  app.add_option("--shifts", opt.shifts,
                 "Also encode K shifted copies of every image (and their mirrors with --flip): 2 pixels right, "
                 "left, down, up, then diagonally (docs/SVM.md); /<split>/features_shift1.. for svm-fit --augment "
                 "shift:K and svm-eval --tta shift:K")
      ->check(CLI::Range(0, cae::kMaxShifts));
  app.add_option("--feature-dtype", opt.dtype,
                 "How the features are stored: float16 (half the bytes; rounded to nearest) or float32 (the codes "
                 "as computed; needed where a code exceeds float16's range, 65504)")
      ->check(CLI::IsMember({"float16", "float32"}));
  cae::add_group_options(app, opt.group, "encodes its share of every split's batches");
}

void run(const Options& opt, const cae::CommonOptions& common) {
  ae::EncodeRequest req;
  req.model = opt.model;
  req.data = opt.data;
  req.output = common.output;
  req.device = common.device;
  req.batch_size = opt.batch_size;
  req.splits = opt.splits;
  req.threads = opt.threads;
  req.flip = opt.flip;
  req.shifts = opt.shifts;
  req.float32 = opt.dtype == "float32";
  req.group = opt.group;
  const ae::EncodeResult r = ae::run_encoding(req);
  if (!r.lead) return;  // a launcher, or a rank whose features rank 0 wrote
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("images", r.images)
                             .add("flip", opt.flip)
                             .add("views", r.views)
                             .add("features", r.features)
                             .add("seconds", r.seconds)
                             .add("images_per_second", r.images_per_second)
                             .add("device", r.device)
                             .add_raw("phases", cae::phases_json())
                             .add("io_read_seconds", r.io_read_seconds)
                             .add("io_write_seconds", r.io_write_seconds)
                             .str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
