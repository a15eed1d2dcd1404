#include "kernels/svm/resumable_units.h"

#include "common/error.h"
#include "common/group.h"

namespace svm {

ResumableUnits::ResumableUnits(int64_t count, cae::GroupExchange* group, UnitLog* log)
    : count_(count),
      group_(group),
      log_(log),
      share_(share_of(count, group ? group->rank() : 0, group ? group->world() : 1)) {}

bool ResumableUnits::replay(int64_t unit) {
  if (!log_) return false;
  const auto it = log_->finished.find(unit);
  if (it == log_->finished.end()) return false;
  records_[unit] = it->second;
  return true;
}

bool ResumableUnits::stop_now() {
  stopping_ = stopping_ || (log_ && log_->stop_now());
  return stopping_;
}

void ResumableUnits::computed(int64_t unit, const std::vector<unsigned char>& record) {
  records_[unit] = record;
  if (log_) log_->finished[unit] = record;
}

bool ResumableUnits::exchange(const std::string& tag, Results to, const std::string& what,
                              const std::string& unit_name) {
  stop_now();  // once more after the share: a request that came during the last unit
  const bool every_rank = to == Results::every_rank;
  if (group_ && group_->world() > 1) {
    // Each rank sends whether it stops, then its records as (unit, bytes) pairs.
    cae::ByteWriter sent;
    sent.put<uint8_t>(stopping_);
    for (const auto& [unit, bytes] : records_) {
      sent.put<int64_t>(unit);
      sent.put_vector(bytes);
    }
    const auto all = group_->gather(tag, sent.bytes(), every_rank);
    // Only rank 0 reads a lead_only gather: every rank hears of a stop separately.
    if (!every_rank) stopping_ = any_rank_stops(*group_, tag + "-stop", stopping_);
    if (!every_rank && !group_->lead()) {
      if (log_) log_->stopped = stopping_;
      return false;
    }
    records_.clear();
    for (int r = 0; r < group_->world(); ++r) {
      cae::ByteReader in(all[static_cast<size_t>(r)], "rank " + std::to_string(r) + "'s " + what);
      stopping_ = in.get<uint8_t>() != 0 || stopping_;
      while (!in.done()) {
        const int64_t unit = in.get<int64_t>();
        if (unit < 0 || unit >= count_ || records_.count(unit)) in.fail("an unknown or repeated " + unit_name);
        records_[unit] = in.get_vector<unsigned char>();
      }
    }
  }
  if (log_) {
    log_->finished = records_;
    log_->stopped = stopping_;
  }
  return !stopping_;
}

}  // namespace svm
