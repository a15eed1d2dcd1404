#include "common/blas_runtime.h"

#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/proc_status.h"

// OpenBLAS extensions (Debian's libopenblas0 exports them), declared weak so the library
// still links against another BLAS, where they are simply not called.
extern "C" {
void openblas_set_num_threads(int num_threads) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace cae {

const char* better_openblas_core() {
  const char* core = openblas_get_corename ? openblas_get_corename() : nullptr;
  if (!core) return nullptr;
  // Only the generic fallbacks are replaced; a core OpenBLAS recognised is left alone.
  const bool fallback = !strcmp(core, "Prescott") || !strcmp(core, "Core2") || !strcmp(core, "Nehalem") ||
                        !strcmp(core, "Sandybridge");
  if (!fallback) return nullptr;
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  return better && strcmp(core, better) != 0 ? better : nullptr;
}

const char* select_openblas_core() {
  if (!openblas_get_corename) return nullptr;
  if (gotoblas_dynamic_init && gotoblas_dynamic_quit && !std::getenv("OPENBLAS_CORETYPE")) {
    if (const char* core = better_openblas_core()) {
      // OPENBLAS_CORETYPE is how OpenBLAS's selection takes a core by name; it is removed
      // again so child processes make their own choice, as this one did.
      setenv("OPENBLAS_CORETYPE", core, 1);
      gotoblas_dynamic_quit();
      gotoblas_dynamic_init();
      unsetenv("OPENBLAS_CORETYPE");
    }
  }
  return openblas_get_corename();
}

namespace {

// Address space taken by the libraries, stacks and HDF5 before any data (MB, measured
// ~200 on the CPU build), and what each BLAS thread adds: its 128 MB buffer, a 64 MB
// malloc arena and its stack.
constexpr uint64_t kBaseMB = 256, kPerThreadMB = 200;

uint64_t address_space_limit_mb() {
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 0;
  return uint64_t(lim.rlim_cur) >> 20;
}

int hardware_threads() { return int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

const char* tool_name(char** argv) {
  const char* slash = argv && argv[0] ? strrchr(argv[0], '/') : nullptr;
  return slash ? slash + 1 : (argv && argv[0] ? argv[0] : "cifar-ae");
}

// Address space the process maps now (VmSize, MB), or 0 when unknown: the libraries' share
// differs between builds (a CUDA build maps ~250 MB before main()).
uint64_t mapped_mb() { return proc_status_bytes("VmSize") >> 20; }

// What one OpenBLAS buffer takes: 128 MB, with room to spare (the thread's stack, arena).
constexpr uint64_t kBufferMB = 160;
constexpr uint64_t kBufferBytes = uint64_t{128} << 20;

// OpenBLAS's buffers mapped already: anonymous mappings of exactly a buffer's size. Each
// pool thread maps its own as it starts, before any job, at a moment of its own (measured:
// VmSize 50 MB at main(), 182 MB 0.2 s later with no BLAS call), so VmSize alone depends on
// when it is read. Two buffers the kernel merged into one mapping count as none, which
// only makes the check stricter.
int mapped_blas_buffers() {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return 0;
  int count = 0;
  char line[512];
  while (fgets(line, sizeof line, maps)) {
    unsigned long long begin = 0, end = 0, inode = 1;
    int path_at = 0;
    if (sscanf(line, "%llx-%llx %*s %*s %*s %llu %n", &begin, &end, &inode, &path_at) < 3) continue;
    const bool anonymous = inode == 0 && (path_at == 0 || line[path_at] == '\0' || line[path_at] == '\n');
    count += anonymous && end - begin == kBufferBytes;
  }
  fclose(maps);
  return count;
}

// Every OpenBLAS thread maps its buffer on its first job: one sgemm large enough to be
// split over all of them does that now, while the address space is still free.
void map_blas_buffers() {
  const int n = 512;
  std::vector<float> a(size_t(n) * n, 1.0f), c(size_t(n) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n);
}

// libgomp's settings, given the only way libgomp takes them: in the environment before it
// initialises. A constructor of priority 101 runs before those without a priority — the
// statically linked libgomp's among them — and after the shared libraries' (libc's) own
// start-up, so setenv works. With a shared libgomp (another build) it would come too late
// and change nothing but the environment children inherit.
__attribute__((constructor(101))) void set_openmp_environment() {
  if (!std::getenv("OMP_WAIT_POLICY")) setenv("OMP_WAIT_POLICY", "passive", 1);
  const uint64_t limit_mb = address_space_limit_mb();
  if (limit_mb >= kMinAddressSpaceMB && !std::getenv("OMP_NUM_THREADS")) {
    char threads[16];
    snprintf(threads, sizeof threads, "%d", blas_threads_for_address_space(limit_mb, hardware_threads()));
    setenv("OMP_NUM_THREADS", threads, 1);
  }
}

}  // namespace

int blas_threads_for_address_space(uint64_t limit_mb, int hardware) {
  if (limit_mb <= kBaseMB) return 1;
  const uint64_t fit = (limit_mb - kBaseMB) / 2 / kPerThreadMB;
  return int(std::clamp<uint64_t>(fit, 1, uint64_t(std::max(1, hardware))));
}

void prepare_compute_environment(char** argv) {
  const uint64_t limit_mb = address_space_limit_mb();
  if (limit_mb > 0) {
    if (limit_mb < kMinAddressSpaceMB) {
      fprintf(stderr, "%s: error: the address-space limit (ulimit -v) of %llu MB is below the %llu MB this tool needs "
                      "to start; raise it\n", tool_name(argv), (unsigned long long)limit_mb,
              (unsigned long long)kMinAddressSpaceMB);
      // _exit: OpenBLAS's exit handlers would spin on the same missing room.
      fflush(stderr);
      _exit(1);
    }
    // OpenBLAS has started its pool already, and every pool thread maps a buffer as it
    // starts (the calling thread on its first job), however few threads get jobs: all
    // of them must fit beside what is mapped, counted whether or not they are mapped yet,
    // or a pool thread spins (and a fork, which joins the pool, never returns).
    const int threads = blas_threads_for_address_space(limit_mb, hardware_threads());
    const int pool = std::max(threads, openblas_get_num_threads ? openblas_get_num_threads() : threads);
    if (openblas_set_num_threads && !std::getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(threads);
    // The buffers are counted before VmSize is read: one mapped in between then counts
    // twice (stricter), never not at all.
    const int pending = std::max(0, pool - mapped_blas_buffers());
    const uint64_t mapped = mapped_mb(), need = mapped + uint64_t(pending) * kBufferMB;
    if (mapped > 0 && limit_mb < need) {
      fprintf(stderr, "%s: error: the address-space limit (ulimit -v) of %llu MB leaves %llu MB beside the %llu MB "
                      "mapped already, less than the %llu MB OpenBLAS's buffers need; raise it\n",
              tool_name(argv), (unsigned long long)limit_mb, (unsigned long long)(limit_mb - std::min(limit_mb, mapped)),
              (unsigned long long)mapped, (unsigned long long)(need - mapped));
      fflush(stderr);
      _exit(1);
    }
  }
  select_openblas_core();
  if (limit_mb > 0) map_blas_buffers();
}

}  // namespace cae
