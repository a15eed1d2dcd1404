// Steps 1 and 2 of a working-set round (kernels/svm/cpu/working_set.h) for several lanes at
// once, on the device: every variable's violation as a sort key, one radix sort of all the
// lanes' keys, a block per lane that takes its working set. The lanes' round state (Lane) and
// what the host reads back (Readback) are declared here for working_set_gpu.cu, which runs
// the rounds, and for the GPU tests, which check this selection against the CPU's
// select_working_set alone.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace svm::cuda {

constexpr int kMaxWorkingSet = 1024;  // a subproblem's variables: one select block's threads
constexpr int kMaxLanes = 128;
// A variable's index takes 24 bits of its sort key (working_set_select.cu).
constexpr int kSortIndexBits = 24;
constexpr int64_t kMaxPairRows = int64_t{1} << kSortIndexBits;

// What the host reads back of a lane each round, one copy for all lanes.
struct Readback {
  int ws[kMaxWorkingSet];
  int count;
  double gap[2];  // m(a), −M(a)
};

// Every lane's device state for one round (uploaded each round; pointers into the lanes'
// buffers).
struct Lane {
  int n = 0, na = 0;
  double Cp = 1, Cn = 1;
  double linear = -1;       // the dual's linear term (working_set_gpu.cuh, WorkingSetPair)
  double* alpha = nullptr;  // [n]
  double* G = nullptr;      // [n]
  uint8_t* chosen = nullptr;  // [n], zero between rounds
  int64_t key_offset = 0;     // up keys at key_offset, low keys at key_offset + n
  int* ws = nullptr;          // [q]
  int* ws_count = nullptr;    // [1]
  double* gap = nullptr;      // [2]: m(a), −M(a)
  int q = 0;                  // the working set's size for this pair: min(q, n)
  const int* kept = nullptr;  // [1 + q]: count, then the variables the last round chose fresh
  int* fresh = nullptr;       // [1 + q]: this round's, likewise (the next round's kept)
  // After the host has read the working set back:
  int count = 0;              // its size
  const int* ws_slot = nullptr;  // [count]: each row's cache slot
  float* cache = nullptr;        // [capacity, n]
  float* Kws = nullptr;          // [count, count]
  double* alpha_ws = nullptr;    // [count]: in and out of the subproblem
  double* alpha_old = nullptr;   // [count]
  double* G_ws = nullptr;        // [count]
  double* diag_ws = nullptr;     // [count]
};

// Key blocks of a lane of n variables (partial_up/partial_low hold that many per lane).
int selection_chunks(int64_t n);

// Device scratch of a selection whose lanes have up to key_capacity keys in all (2 per
// variable) in up to chunks key blocks a lane.
struct SelectionScratch {
  uint64_t* keys = nullptr;    // [key_capacity]
  uint64_t* sorted = nullptr;  // [key_capacity]
  void* sort_temp = nullptr;   // [sort_temp_bytes]
  size_t sort_temp_bytes = 0;  // selection_sort_bytes(key_capacity)
  double* partial_up = nullptr;   // [lanes × chunks]
  double* partial_low = nullptr;  // [lanes × chunks]
};
size_t selection_sort_bytes(int64_t key_capacity, cudaStream_t stream);

// The working sets of `lanes` lanes (d_lanes on the device; their key_offset laid out one
// after another, key_total keys in all; chunks = the largest selection_chunks of them): each
// lane's ws, ws_count, gap and fresh list written, its chosen marks left zero.
void select_working_sets(const Lane* d_lanes, int lanes, int chunks, int64_t key_total, const SelectionScratch& scratch,
                         cudaStream_t stream);

}  // namespace svm::cuda
