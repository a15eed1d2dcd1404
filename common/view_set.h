// The views of every image that ae-encode encodes and svm-fit --augment / svm-eval --tta use:
// the image itself, optionally its left-right mirror, and K shifted copies (each mirrored too
// when the set has the mirror). Named by a spec "none", "flip", "shift:K" or "flip,shift:K"
// (docs/SVM.md); the views' features are the datasets /<split>/features_dataset(view) of an
// ae-features file (docs/FORMATS.md). The layers above read it: ae-encode makes the views'
// pixels (kernels/ae/augment.h), the SVM counts the rows of one image (grouped folds) and
// averages their decision values.
#pragma once
#include <string>
#include <vector>

namespace cae {

// A translation of an image by dy rows (down for dy > 0) and dx columns (right for dx > 0).
struct ShiftOffset {
  int dy = 0, dx = 0;
};

// The shifts 1..kMaxShifts, in this order (docs/DECISIONS.md): right, left, down, up by 2
// pixels, then the four diagonals (+2,+2), (−2,−2), (+2,−2), (−2,+2) as (dy, dx). Shift:K
// takes the first K, so shift:2 is symmetric left-right and shift:4 in both axes.
inline constexpr int kMaxShifts = 8;
ShiftOffset shift_offset(int shift);  // 1 <= shift <= kMaxShifts, else std::invalid_argument

// One view of an image: shift 0 (none) or 1..kMaxShifts (shift_offset), then mirrored left
// to right when `mirrored` (the mirror of the shifted image).
struct ImageView {
  int shift = 0;
  bool mirrored = false;
  bool operator==(const ImageView& o) const { return shift == o.shift && mirrored == o.mirrored; }
};

// "features", "features_flip", "features_shift1", "features_shift1_flip", ...
std::string features_dataset(const ImageView& view);
// Words for messages: "mirrored", "shifted (+0,+2)", "mirrored shifted (+0,+2)"; "" for the image itself.
std::string view_label(const ImageView& view);

class ViewSet {
 public:
  ViewSet() = default;  // the image alone
  // With its mirror when `flip` and `shifts` shifted copies. Explicit: a bool is not a view
  // set, and a call that passes one where a view set is wanted should not compile.
  explicit ViewSet(bool flip, int shifts = 0);  // 0 <= shifts <= kMaxShifts, else std::invalid_argument
  // "none", or comma-separated terms "flip" and "shift:K" (K in 1..kMaxShifts), each at most
  // once, in any order; anything else: std::invalid_argument saying what is wrong.
  static ViewSet parse(const std::string& spec);

  bool flip() const { return flip_; }
  int shifts() const { return shifts_; }
  int count() const { return (1 + shifts_) * (flip_ ? 2 : 1); }  // rows per image
  // The views in row-block order: the image, [its mirror], shift 1, [shift 1 mirrored], ...
  // ("flip" is the image then its mirror).
  std::vector<ImageView> views() const;
  // The canonical spec: "none", "flip", "shift:K", "flip,shift:K".
  std::string spec() const;
  // What a fit's rows are: "images", "images + mirrors", "images + 2 shifted copies",
  // "images + mirrors + 2 shifted copies and their mirrors".
  std::string rows_description() const;

 private:
  bool flip_ = false;
  int shifts_ = 0;
};

}  // namespace cae
