// Which kernel rows a working-set solver keeps, least recently used evicted first: slots
// threaded on a list, for the CPU's rows in host memory (cpu/working_set.cpp) and the GPU's
// in device memory (cuda/working_set_gpu.cu) alike. Only the bookkeeping: the caller owns
// the rows. A round touches the rows it already has before it takes slots for the others, and
// the capacity is at least its working set, so a round never evicts one of its own rows.
#pragma once
#include <vector>

namespace svm {

class RowSlots {
 public:
  RowSlots(int items, int capacity) : slot_of_(items, -1), owner_(capacity, -1), prev_(capacity, -1), next_(capacity, -1) {
    for (int s = 0; s < capacity; ++s) push_front(s);  // all free; any order
  }
  int capacity() const { return static_cast<int>(owner_.size()); }
  int slot_of(int t) const { return slot_of_[t]; }
  void touch(int slot) {
    unlink(slot);
    push_front(slot);
  }
  // A slot for t (which has none), taken from the least recently used row.
  int take_for(int t) {
    const int s = tail_;
    if (owner_[s] >= 0) slot_of_[owner_[s]] = -1;
    owner_[s] = t;
    slot_of_[t] = s;
    touch(s);
    return s;
  }

 private:
  void unlink(int s) {
    (prev_[s] >= 0 ? next_[prev_[s]] : head_) = next_[s];
    (next_[s] >= 0 ? prev_[next_[s]] : tail_) = prev_[s];
    prev_[s] = next_[s] = -1;
  }
  void push_front(int s) {
    prev_[s] = -1;
    next_[s] = head_;
    (head_ >= 0 ? prev_[head_] : tail_) = s;
    head_ = s;
  }
  std::vector<int> slot_of_, owner_, prev_, next_;
  int head_ = -1, tail_ = -1;
};

}  // namespace svm
