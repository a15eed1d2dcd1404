// Atomic outputs: a tool writes to a hidden temporary file beside the final one and
// renames it on success, so Make (or a user) never sees a half-written file under the
// final name — also after an error, Ctrl-C or SIGTERM (the temp file is removed then).
// A SIGKILL can leave a hidden ".NAME.tmp-PID" behind, never a partial NAME.
#pragma once
#include <string>

namespace cae {

class AtomicOutput {
 public:
  // Checks up front that the folder exists and is writable and that `final_path` is not a
  // folder, so a long computation does not fail at its very end.
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

// The checks AtomicOutput's constructor makes (folder exists and is writable, the path is
// not a folder), for tools to run before any work: run_tool() does so for -o.
void check_output_path(const std::string& final_path);

// Installs SIGINT/SIGTERM/SIGHUP handlers that unlink every live temporary file and then
// die by the same signal. Called once by run_tool().
void install_cleanup_signal_handlers();

}  // namespace cae
