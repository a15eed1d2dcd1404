// The reader sandbox (hdf5_probe.h).
//
// HDF5 1.10 trusts the metadata of the files it opens: a damaged global heap (where the
// variable-length string attributes live) makes H5Aread copy out of bounds (SIGSEGV) or
// allocate gigabytes, and other damage does the same elsewhere (docs/RELIABILITY.md). A bad
// file must not crash a tool, so before a reader uses a file, a forked child walks all of
// its metadata — every object, every attribute value, every dataset's type, dataspace,
// filters and chunk index — under a memory and a time limit, and answers by its exit
// status. Only a file whose walk finished cleanly is opened by the tool itself (which then
// runs the same library code on the same bytes). Raw data is not read: zlib checks it.
#include "common/hdf5_probe.h"

#include <hdf5.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/hdf5_handle.h"
#include "common/proc_status.h"

namespace cae {

using h5::Handle;

namespace {

bool g_probe_enabled = true;
// Walking the metadata of a good file takes milliseconds; a damaged one can make HDF5 loop
// forever (found by fuzzing). CAE_HDF5_PROBE_SECONDS overrides the limit (tests, slow disks).
unsigned probe_seconds() {
  const char* v = getenv("CAE_HDF5_PROBE_SECONDS");
  const long s = v ? strtol(v, nullptr, 10) : 0;
  return s > 0 ? unsigned(s) : 20;
}
constexpr rlim_t kProbeExtraMemory = rlim_t(1) << 30;  // above what the process already uses
constexpr size_t kProbeMaxAttrBytes = size_t(64) << 20;
constexpr int kProbeCannotOpen = 10, kProbeBadObject = 11, kProbeForeign = 12;

struct ProbeState {
  std::string bad;  // what could not be read
};

herr_t probe_attribute(hid_t loc, const char* name, const H5A_info_t*, void* data) {
  auto* st = static_cast<ProbeState*>(data);
  Handle a(H5Aopen(loc, name, H5P_DEFAULT));
  Handle type(a.ok() ? H5Aget_type(a.get()) : -1);
  Handle space(a.ok() ? H5Aget_space(a.get()) : -1);
  Handle mem_type(type.ok() ? H5Tget_native_type(type.get(), H5T_DIR_DEFAULT) : -1);
  hssize_t n = space.ok() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  size_t size = mem_type.ok() ? H5Tget_size(mem_type.get()) : 0;
  if (n < 0 || size == 0 || size_t(n) > kProbeMaxAttrBytes / size) {
    st->bad = std::string("attribute ") + name;
    return -1;
  }
  std::vector<unsigned char> buf(size * size_t(n) + 1, 0);
  if (n > 0 && H5Aread(a.get(), mem_type.get(), buf.data()) < 0) {
    st->bad = std::string("attribute ") + name;
    return -1;
  }
  if (n > 0) H5Dvlen_reclaim(mem_type.get(), space.get(), H5P_DEFAULT, buf.data());  // no-op for fixed-size types
  return 0;
}

herr_t probe_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto* st = static_cast<ProbeState*>(data);
  const std::string where = std::string(name) == "." ? "/" : "/" + std::string(name);
  Handle o(H5Oopen(root, name, H5P_DEFAULT));
  if (!o.ok()) {
    st->bad = where;
    return -1;
  }
  if (H5Aiterate2(o.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, probe_attribute, st) < 0) {
    st->bad = (st->bad.empty() ? std::string("attributes") : st->bad) + " of " + where;
    return -1;
  }
  if (info->type != H5O_TYPE_DATASET) return 0;
  Handle type(H5Dget_type(o.get())), space(H5Dget_space(o.get())), dcpl(H5Dget_create_plist(o.get()));
  bool ok = type.ok() && space.ok() && dcpl.ok() && H5Tget_size(type.get()) > 0 &&
            H5Sget_simple_extent_npoints(space.get()) >= 0 && H5Pget_layout(dcpl.get()) >= 0;
  int nfilters = ok ? H5Pget_nfilters(dcpl.get()) : -1;
  for (int i = 0; ok && i < nfilters; ++i) {
    unsigned flags = 0, cd[8] = {0};
    size_t ncd = 8;
    ok = H5Pget_filter2(dcpl.get(), unsigned(i), &flags, &ncd, cd, 0, nullptr, nullptr) >= 0;
  }
  H5D_space_status_t status;
  // get_storage_size walks the whole chunk index (B-tree) of a chunked dataset.
  ok = ok && nfilters >= 0 && H5Dget_space_status(o.get(), &status) >= 0 && (H5Dget_storage_size(o.get()), true);
  if (!ok) {
    st->bad = "dataset " + where;
    return -1;
  }
  return 0;
}

herr_t check_link(hid_t root, const char* name, const H5L_info_t* info, void* data) {
  auto* out = static_cast<std::string*>(data);
  const std::string where = "/" + std::string(name);
  if (info->type == H5L_TYPE_SOFT) return 0;  // a path inside this file, checked where it points
  if (info->type == H5L_TYPE_EXTERNAL) {
    std::string target = "another file";
    std::vector<char> val(std::min<size_t>(info->u.val_size, 4096) + 1, 0);
    const char *file = nullptr, *obj = nullptr;
    unsigned flags = 0;
    if (info->u.val_size <= 4096 && H5Lget_val(root, name, val.data(), val.size(), H5P_DEFAULT) >= 0 &&
        H5Lunpack_elink_val(val.data(), info->u.val_size, &flags, &file, &obj) >= 0 && file && obj)
      target = std::string(file) + ":" + obj;
    *out = where + " is an external link to " + target + "; toolkit files must hold their own data";
    return 1;
  }
  if (info->type != H5L_TYPE_HARD) {
    *out = where + " is a user-defined link; toolkit files must hold their own data";
    return 1;
  }
  Handle o(H5Oopen(root, name, H5P_DEFAULT));
  if (!o.ok() || H5Iget_type(o.get()) != H5I_DATASET) return 0;  // unreadable objects: the walk reports them
  Handle dcpl(H5Dget_create_plist(o.get()));
  if (!dcpl.ok()) return 0;
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
    *out = "dataset " + where + " is a virtual dataset (its data is in other files); toolkit files must hold their own data";
    return 1;
  }
  const int n_external = H5Pget_external_count(dcpl.get());
  if (n_external > 0) {
    char file[1024] = {0};
    off_t offset = 0;
    hsize_t size = 0;
    std::string which = H5Pget_external(dcpl.get(), 0, sizeof file - 1, file, &offset, &size) >= 0 ? file : "?";
    *out = "dataset " + where + " keeps its data in an external file (" + which + "); toolkit files must hold their own data";
    return 1;
  }
  return 0;
}

}  // namespace

std::string foreign_storage(hid_t file) {
  std::string found;
  if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, check_link, &found) < 0 && found.empty())
    return "its link table cannot be read";
  return found;
}

namespace {

// The child's side: 0 when every object and attribute could be read.
int probe_child(const std::string& path, std::string& bad) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return kProbeCannotOpen;
  // First what the walk below would not see: links and storage outside the file.
  bad = foreign_storage(file);
  if (!bad.empty()) {
    H5Fclose(file);
    return kProbeForeign;
  }
  ProbeState st;
  herr_t rc = H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, probe_object, &st, H5O_INFO_BASIC);
  H5Fclose(file);
  if (rc < 0) {
    bad = st.bad.empty() ? std::string("its object tree") : st.bad;
    return kProbeBadObject;
  }
  return 0;
}

}  // namespace

void set_hdf5_metadata_probe(bool enabled) { g_probe_enabled = enabled; }

void probe_hdf5_metadata(const std::string& path) {
  if (!g_probe_enabled) return;
  int fds[2];
  if (pipe(fds) != 0) return;  // no probe possible: read the file unprobed
  const rlim_t data_now = rlim_t(proc_status_bytes("VmData"));  // 0 when unknown
  const unsigned limit_s = probe_seconds();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    // A crash is the probe's answer, not something to report or clean up after: default
    // dispositions (also over a sanitizer's handlers), and no atexit/stdio flushing (_exit).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) signal(sig, SIG_DFL);
    if (data_now > 0) {
      struct rlimit lim = {data_now + kProbeExtraMemory, data_now + kProbeExtraMemory};
      setrlimit(RLIMIT_DATA, &lim);
    }
    alarm(limit_s);
    std::string bad;
    int code = probe_child(path, bad);
    if (!bad.empty() && write(fds[1], bad.data(), std::min<size_t>(bad.size(), 400)) < 0) code = kProbeBadObject;
    _exit(code);
  }
  close(fds[1]);
  std::string bad;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) != 0) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    bad.append(buf, size_t(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return;
  if (WIFSIGNALED(status)) {
    if (WTERMSIG(status) == SIGALRM)
      fail_file(path, "corrupted HDF5 file: reading its metadata did not finish in " + std::to_string(limit_s) + " s");
    fail_file(path, "corrupted HDF5 file: the HDF5 library crashed reading its metadata (signal " +
                        std::to_string(WTERMSIG(status)) + ")");
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return;
  if (code == kProbeCannotOpen) fail_file(path, "cannot open as HDF5 (truncated or corrupted?)");
  if (code == kProbeBadObject) fail_file(path, "corrupted HDF5 metadata: cannot read " + bad);
  if (code == kProbeForeign) fail_file(path, bad);
  fail_file(path, "corrupted HDF5 file: reading its metadata failed (probe exit status " + std::to_string(code) + ")");
}

}  // namespace cae
