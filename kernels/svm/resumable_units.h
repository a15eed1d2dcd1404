// The loop svm-fit's two cross-validations share (resume.h): a list of units numbered
// 0..count−1 (the grid's (fold, gamma) cells, the probability folds), each rank of a group
// taking a contiguous share; each unit's result is a record of bytes that depends on
// nothing but the unit, so a unit the UnitLog already holds is replayed, not computed; the
// log's stop request is read before computing each unit and once after this rank's share;
// and at the end the ranks exchange their records and whether any of them stopped.
//
// The caller walks its share in whatever order suits its computation (cross_validate
// prepares a fold once for all of its cells) and asks this object three things per unit:
// replay it? stop before it? here is its record.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/svm/group_fit.h"
#include "kernels/svm/resume.h"

namespace cae {
class GroupExchange;
}

namespace svm {

class ResumableUnits {
 public:
  // Units [0, count) over `group` (null: this process alone), replayed from and recorded
  // into `log` (null: computed, never stopped).
  ResumableUnits(int64_t count, cae::GroupExchange* group, UnitLog* log);

  // This rank's units.
  Share share() const { return share_; }
  bool mine(int64_t unit) const { return unit >= share_.first && unit < share_.first + share_.count; }
  // A unit of this rank's share: true, with its record taken, when the log holds it; false
  // when it is still to be computed.
  bool replay(int64_t unit);
  // Whether this rank has the unit's record (replayed or computed).
  bool has(int64_t unit) const { return records_.count(unit) != 0; }
  // Before computing a unit: whether the log asks to stop (then the caller computes no more).
  bool stop_now();
  // A unit computed here: its record, also added to the log.
  void computed(int64_t unit, const std::vector<unsigned char>& record);

  // Where every rank's records go: to every rank (each computes the result), or to rank 0
  // alone (the others then return no result).
  enum class Results { every_rank, lead_only };
  // After this rank's share: the last stop check, then on a group the exchange of records
  // (tag: the exchange's name; `what` names a rank's records in errors, `unit_name` one
  // unit). Sets the log's `stopped` and, where the records went, its `finished` to them.
  // True when this rank now holds the records of every rank and no rank stopped: it goes
  // on to compute the result from records().
  bool exchange(const std::string& tag, Results to, const std::string& what, const std::string& unit_name);
  const std::map<int64_t, std::vector<unsigned char>>& records() const { return records_; }

 private:
  int64_t count_;
  cae::GroupExchange* group_;
  UnitLog* log_;
  Share share_;
  std::map<int64_t, std::vector<unsigned char>> records_;
  bool stopping_ = false;
};

}  // namespace svm
