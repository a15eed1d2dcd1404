#include "common/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/error.h"
#include "common/image_decode.h"
#include "common/log.h"

namespace cae {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) fail_file(dir, std::string("cannot open folder: ") + strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = readdir(d.get()))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_image_name(const std::string& name) {
  const size_t dot = name.find_last_of('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

// The image files of every class of one split, in dataset order, with their labels.
struct Listing {
  std::vector<std::string> files;
  std::vector<uint8_t> labels;
};

Listing list_split(const std::string& root, const std::vector<std::string>& classes) {
  std::vector<std::vector<std::string>> per_class(classes.size());
  size_t longest = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::string folder = root + "/" + classes[c];
    if (!is_dir(folder)) continue;  // a test split may lack a class
    for (const std::string& f : list_dir(folder))
      if (is_image_name(f)) per_class[c].push_back(folder + "/" + f);
    if (per_class[c].empty()) fail_file(folder, "class folder has no .png/.jpg/.jpeg images");
    longest = std::max(longest, per_class[c].size());
  }
  Listing l;
  for (size_t i = 0; i < longest; ++i)
    for (size_t c = 0; c < classes.size(); ++c)
      if (i < per_class[c].size()) {
        l.files.push_back(per_class[c][i]);
        l.labels.push_back(uint8_t(c));
      }
  return l;
}

}  // namespace

bool is_image_folder(const std::string& dir) { return is_dir(dir + "/train"); }

ImageFolder read_image_folder(const std::string& dir, const ImageFolderOptions& opt) {
  if (!is_dir(dir)) fail_file(dir, "is not a folder");
  if (!is_dir(dir + "/train")) fail_file(dir, "has no train/ folder (expected DIR/train/CLASS/*.png and DIR/test/CLASS/*)");
  if (!is_dir(dir + "/test")) fail_file(dir, "has no test/ folder (expected DIR/train/CLASS/*.png and DIR/test/CLASS/*)");
  ImageFolder out;
  for (const std::string& name : list_dir(dir + "/train"))
    if (is_dir(dir + "/train/" + name)) out.class_names.push_back(name);
  if (out.class_names.empty()) fail_file(dir + "/train", "has no class folders");
  if (out.class_names.size() > 256) fail_file(dir + "/train", "has more than 256 class folders (labels are one byte)");
  for (const std::string& name : list_dir(dir + "/test"))
    if (is_dir(dir + "/test/" + name) &&
        std::find(out.class_names.begin(), out.class_names.end(), name) == out.class_names.end())
      fail_file(dir + "/test/" + name, "is a class that train/ does not have");
  if ((opt.height > 0) != (opt.width > 0)) throw std::invalid_argument("read_image_folder: give both height and width");

  int H = opt.height, W = opt.width;
  std::string size_from;  // the file that set H×W when no size was given
  bool all_gray = true;
  // Decoded images are converted to RGB first; when every source was gray and no channel
  // count was asked for, the dataset is gray — R of a replicated gray plane is exact.
  const int work_c = opt.channels > 0 ? opt.channels : 3;
  for (int s = 0; s < 2; ++s) {
    const std::string split = s == 0 ? "train" : "test";
    const Listing l = list_split(dir + "/" + split, out.class_names);
    const int64_t limit = s == 0 ? opt.train_limit : opt.test_limit;
    ImageSplit& sp = s == 0 ? out.train : out.test;
    for (size_t i = 0; i < l.files.size() && (limit <= 0 || sp.size() < limit); ++i) {
      DecodedImage img;
      try {
        img = decode_image_file(l.files[i]);
      } catch (const UnsupportedInput& e) {
        if (!opt.skip_bad) throw;
        ++out.skipped;
        log_warn("skipped (unsupported, not damaged): %s", e.what());
        continue;
      } catch (const std::runtime_error& e) {
        if (!opt.skip_bad) throw;
        ++out.skipped;
        log_warn("skipped (corrupt or unreadable): %s", e.what());
        continue;
      }
      if (H == 0) {
        H = img.height, W = img.width;
        size_from = l.files[i];
      } else if (opt.height == 0 && (img.height != H || img.width != W)) {
        fail_file(l.files[i], "is " + std::to_string(img.width) + "x" + std::to_string(img.height) + " pixels but " +
                                  quoted_name(size_from) + " is " + std::to_string(W) + "x" + std::to_string(H) +
                                  " (give --image-size to resize them all)");
      }
      all_gray = all_gray && img.channels == 1;
      const std::vector<uint8_t> px = convert_image(img, work_c, H, W);
      sp.images.insert(sp.images.end(), px.begin(), px.end());
      sp.labels.push_back(l.labels[i]);
      out.files.push_back(l.files[i]);
    }
    if (sp.size() == 0) fail_file(dir + "/" + split, "has no images that could be read");
  }
  const int C = opt.channels > 0 ? opt.channels : (all_gray ? 1 : 3);
  for (ImageSplit* sp : {&out.train, &out.test}) {
    sp->C = C, sp->H = H, sp->W = W;
    if (C != work_c) {  // 3 → 1: keep the first plane of each image
      const size_t plane = size_t(H) * W;
      for (int64_t i = 0; i < sp->size(); ++i)
        std::memmove(sp->images.data() + i * plane, sp->images.data() + i * 3 * plane, plane);
      sp->images.resize(size_t(sp->size()) * plane);
    }
  }
  return out;
}

}  // namespace cae
