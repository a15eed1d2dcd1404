"""Holds the CUDA driver initialised while process PID lives.

    python3 pipelines/hold-cuda-driver.py PID [LIBRARY]

`make pipeline` starts it in the background beside its first stage, with PID = make's own
pid (pipelines/pipeline.mk). A process's first cuInit takes 0.1-0.2 s on a GPU host when no
other process has initialised the driver, and ~0.01 s while one has: with this process
holding it, each GPU tool of the chain starts that much sooner (docs/DECISIONS.md, "The CUDA
driver held through the pipeline"). It calls cuInit only: no context, no GPU memory, no
work. Without the driver library (LIBRARY, default libcuda.so.1) or a GPU it exits at once;
otherwise it exits as soon as PID has ended, whichever way it ended.
"""
import ctypes
import os
import select
import sys
import time


def watch(pid):
    """A pidfd of `pid` (readable once it has ended), None where pidfds are missing (Python <
    3.9, Linux < 5.3), or -1 when `pid` has already ended. Opened before cuInit, so that a pid
    reused meanwhile is never mistaken for PID."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except (AttributeError, OSError):
        return None


def wait_for_exit(pid, fd):
    """Returns once process `pid` (watched by `fd` from watch()) has ended."""
    if fd is not None:
        select.select([fd], [], [])
        return
    while True:  # no pidfd: ask every 0.2 s
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass  # alive, another user's
        time.sleep(0.2)


def main(argv):
    if len(argv) not in (2, 3) or not argv[1].isdigit():
        print("usage: hold-cuda-driver.py PID [LIBRARY]", file=sys.stderr)
        return 2
    pid = int(argv[1])
    library = argv[2] if len(argv) == 3 else "libcuda.so.1"
    fd = watch(pid)
    if fd == -1:
        return 0
    try:
        driver = ctypes.CDLL(library)
    except OSError:
        return 0  # no CUDA driver here: nothing to hold
    if driver.cuInit(0) != 0:  # no usable GPU: nothing is held
        return 0
    wait_for_exit(pid, fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
