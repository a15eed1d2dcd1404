#include "common/view_set.h"

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace cae {

ShiftOffset shift_offset(int shift) {
  static constexpr ShiftOffset kOffsets[kMaxShifts] = {{0, 2}, {0, -2}, {2, 0}, {-2, 0},
                                                       {2, 2}, {-2, -2}, {2, -2}, {-2, 2}};
  if (shift < 1 || shift > kMaxShifts)
    throw std::invalid_argument("shift " + std::to_string(shift) + " is not 1.." + std::to_string(kMaxShifts));
  return kOffsets[shift - 1];
}

std::string features_dataset(const ImageView& view) {
  return std::string("features") + (view.shift ? "_shift" + std::to_string(view.shift) : "") +
         (view.mirrored ? "_flip" : "");
}

std::string view_label(const ImageView& view) {
  std::string label = view.mirrored ? "mirrored" : "";
  if (view.shift) {
    const ShiftOffset o = shift_offset(view.shift);
    char offset[32];
    snprintf(offset, sizeof offset, "(%+d,%+d)", o.dy, o.dx);
    label += (label.empty() ? "" : " ") + std::string("shifted ") + offset;
  }
  return label;
}

ViewSet::ViewSet(bool flip, int shifts) : flip_(flip), shifts_(shifts) {
  if (shifts < 0 || shifts > kMaxShifts)
    throw std::invalid_argument("shift:" + std::to_string(shifts) + ": K must be 1.." + std::to_string(kMaxShifts));
}

ViewSet ViewSet::parse(const std::string& spec) {
  if (spec == "none") return ViewSet();
  const std::string known = " (none, or flip and/or shift:K with K in 1.." + std::to_string(kMaxShifts) + ")";
  bool flip = false, shift_given = false;
  int shifts = 0;
  // getline drops a trailing empty term ("flip,"): checked here.
  if (spec.empty() || spec.back() == ',') throw std::invalid_argument("'" + spec + "' has an empty view" + known);
  std::stringstream terms(spec);
  std::string term;
  while (std::getline(terms, term, ',')) {
    if (term.empty()) throw std::invalid_argument("'" + spec + "' has an empty view" + known);
    if (term == "flip") {
      if (flip) throw std::invalid_argument("'flip' given twice in '" + spec + "'");
      flip = true;
    } else if (term.rfind("shift:", 0) == 0) {
      if (shift_given) throw std::invalid_argument("shift given twice in '" + spec + "'");
      const std::string k = term.substr(6);
      size_t used = 0;
      long value = -1;
      try {
        value = std::stol(k, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (k.empty() || used != k.size() || value < 1 || value > kMaxShifts)
        throw std::invalid_argument("'" + term + "': K must be an integer 1.." + std::to_string(kMaxShifts));
      shifts = static_cast<int>(value);
      shift_given = true;
    } else {
      throw std::invalid_argument("unknown view '" + term + "' in '" + spec + "'" + known);
    }
  }
  return ViewSet(flip, shifts);
}

std::vector<ImageView> ViewSet::views() const {
  std::vector<ImageView> v;
  for (int s = 0; s <= shifts_; ++s)
    for (bool m : {false, true})
      if (!m || flip_) v.push_back({s, m});
  return v;
}

std::string ViewSet::spec() const {
  if (!flip_ && shifts_ == 0) return "none";
  const std::string shift = shifts_ ? "shift:" + std::to_string(shifts_) : "";
  if (!flip_) return shift;
  return shift.empty() ? "flip" : "flip," + shift;
}

std::string ViewSet::rows_description() const {
  std::string d = flip_ ? "images + mirrors" : "images";
  if (shifts_)
    d += " + " + std::to_string(shifts_) + (shifts_ == 1 ? " shifted copy" : " shifted copies") +
         (flip_ ? " and their mirrors" : "");
  return d;
}

}  // namespace cae
