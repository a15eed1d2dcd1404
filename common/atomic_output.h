// Atomic outputs: a tool writes to a hidden temporary file beside the final one and
// renames it on success, so Make (or a user) never sees a half-written file under the
// final name — also after an error, Ctrl-C or SIGTERM (the temp file is removed then).
// A SIGKILL can leave a hidden ".NAME.tmp-PID-K" behind, never a partial NAME.
//
// Outputs must not be inputs, nor each other (docs/RELIABILITY.md, class 1): a rename
// onto an input would replace the data being read, and two outputs on one file would
// race. check_distinct() compares files by device and inode (an existing file under any
// spelling, a symlink or a hard link) and by resolved path (a file not created yet);
// run_tool() runs it on every tool's options before any work, and AtomicOutput refuses a
// second live output on the same file.
#pragma once
#include <string>
#include <vector>

namespace cae {

class AtomicOutput {
 public:
  // Checks up front that the folder exists and is writable, that `final_path` is not a
  // folder, that no other live AtomicOutput writes the same file and that the temporary
  // name fits the file system, so a long computation does not fail at its very end.
  explicit AtomicOutput(const std::string& final_path);
  ~AtomicOutput();  // removes the temporary file unless commit() succeeded
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& temp_path() const { return temp_; }
  const std::string& final_path() const { return final_; }
  void commit();  // fsync + rename(temp, final)

 private:
  std::string final_, temp_;
  int slot_ = -1;
  bool committed_ = false;
};

// The hidden temporary name of `final_path` for the process's `serial`-th output:
// "DIR/.NAME.tmp-PID-SERIAL". Unique per output, so two outputs never share one. A NAME
// so long that the temporary name would exceed the folder's NAME_MAX is shortened (the
// PID and serial keep it unique); the final name itself is never changed.
std::string temp_path_for(const std::string& final_path, unsigned serial);

// The checks AtomicOutput's constructor makes (folder exists and is writable, the path is
// not a folder, the final and temporary names fit NAME_MAX and PATH_MAX), for tools to
// run before any work: run_tool() does so for every output option.
void check_output_path(const std::string& final_path);

// A file named on the command line, by the option that named it ("-o", "--features").
struct FileArg {
  std::string option;
  std::string path;
};

// Throws UsageError (exit 2) when an output is the same file as an input or as another
// output: same device and inode for files that exist (so "dir/./x.h5", a symlink and a
// hard link are caught), same resolved path (realpath of the folder + name) otherwise.
void check_distinct(const std::vector<FileArg>& inputs, const std::vector<FileArg>& outputs);

// Installs SIGINT/SIGTERM/SIGHUP handlers that unlink every live temporary file and then
// die by the same signal. Called once by run_tool(). A tool may add a line of its own to
// print first (async-signal-safe: a fixed buffer, written with write(2)); ae-train says
// where its checkpoint is. An empty message removes it.
void install_cleanup_signal_handlers();
void set_signal_message(const std::string& message);

}  // namespace cae
