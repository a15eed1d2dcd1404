"""Work in forked children, so the report's wall time is its slowest part, not the sum of
its parts (issue 17): the sha256 of each input file (features.h5 is ~2 GB on a full run),
and one child per figure (matplotlib is single-threaded; a figure takes 0.1–0.5 s); and
the sandbox each input file is read in (load.start_read adds its memory and time limits).

A child inherits everything the parent has imported and loaded (copy-on-write), so no
inputs are pickled; only its result comes back, pickled through a pipe. Every child still
running is killed when the report stops (kill_all, from cli.main's cleanup)."""
import errno
import gc
import hashlib
import os
import pickle
import select
import signal
import stat

_running = set()  # pids of the children not yet waited for


class ChildFailed(Exception):
    """A job raised in its child, or its child died: the message says which job and why."""


def fork_child(work, prepare=None, error_text=None):
    """Forks a child that runs prepare() (its limits: rlimits, an alarm), then work(), and
    sends back ("ok", value) or ("error", text), text being error_text(exception) or
    "<type>: <message>". → (pid, read end of the pipe). The one way the report forks: its
    figures, its hashes and its sandboxed file readers (load.start_read)."""
    rfd, wfd = os.pipe()
    # A child's garbage collector would walk (and so copy, page by page) every object the
    # parent holds; frozen, they are left alone, and the child's short life needs no GC.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            gc.disable()
            os.close(rfd)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            try:
                if prepare:
                    prepare()
                result = ("ok", work())
            except Exception as err:  # noqa: BLE001  (sent to the parent, which decides)
                result = ("error", error_text(err) if error_text else f"{type(err).__name__}: {err}")
            with os.fdopen(wfd, "wb") as pipe_out:
                pickle.dump(result, pipe_out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    os.close(wfd)
    _running.add(pid)
    return pid, rfd


def collect(pid, rfd):
    """Everything the child sent and its wait status, once it ended: → (status, payload).
    Interrupted while waiting, it kills the child first."""
    try:
        with os.fdopen(rfd, "rb") as pipe_in:
            payload = pipe_in.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        kill(pid)
        raise
    _running.discard(pid)
    return status, payload


def answer(status, payload):
    """The child's ("ok", value) or ("error", text), or None when it sent none."""
    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001  (a child killed mid-write)
        return None


def _reap(pid, payload, what):
    _, status = os.waitpid(pid, 0)
    _running.discard(pid)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            raise KeyboardInterrupt(sig)
        raise ChildFailed(f"{what}: the worker crashed ({signal.Signals(sig).name})")
    result = answer(status, payload)
    if result is None:
        raise ChildFailed(f"{what}: the worker stopped without an answer")
    state, value = result
    if state == "error":
        raise ChildFailed(f"{what}: {value}")
    return value


def workers():
    """How many children may run at once: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


SERIAL_BELOW = 4  # CPUs: with fewer, run_parallel runs the jobs in this process


def run_parallel(jobs, limit=None, later=()):
    """Runs each (name, callable) of jobs in its own child, at most `limit` at once (default:
    the CPUs; fewer than SERIAL_BELOW: all here, in turn), and returns {name: value}.
    `later`: (fd, make_job) pairs, a job that waits for something under way (a reader's
    answer): once fd is readable, make_job() → the (name, callable) to run, ahead of the jobs
    not yet started. The first failure (ChildFailed, or what make_job raised) is raised after
    the children already started are collected (none is left behind)."""
    limit = limit or workers()
    if limit < SERIAL_BELOW:
        # On a machine of 2–3 CPUs the children's page faults (each copies what it touches
        # of the parent) cost more than the overlap gains (docs/DECISIONS.md, "The report's
        # start-up and Make's own time"). There the figures are drawn one after another, here.
        results = {}

        def each_job():  # the waiting ones last: what they wait for is under way meanwhile
            yield from jobs
            for _fd, make_job in later:
                yield make_job()
        for name, work in each_job():
            try:
                results[name] = work()
            except Exception as err:  # noqa: BLE001  (the same error as from a child)
                raise ChildFailed(f"{name}: {type(err).__name__}: {err}") from None
        return results
    pending = list(jobs)
    waiting = dict(later)  # fd → make_job
    active = {}  # read fd → [name, pid, bytes so far]
    results, failure = {}, None
    while pending or active or waiting:
        while pending and len(active) < limit and failure is None:
            name, work = pending.pop(0)
            pid, rfd = fork_child(work)
            active[rfd] = [name, pid, bytearray()]
        if not active and not waiting:
            break
        ready, _, _ = select.select(list(active) + list(waiting), [], [])
        for fd in [fd for fd in ready if fd in waiting]:
            make_job = waiting.pop(fd)
            try:
                job = make_job()
            except Exception as err:  # noqa: BLE001  (raised once the children are collected)
                failure = failure or err
                continue
            if failure is None:
                pending.insert(0, job)
        for fd in [fd for fd in ready if fd in active]:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                active[fd][2] += chunk
                continue
            name, pid, payload = active.pop(fd)
            os.close(fd)
            try:
                results[name] = _reap(pid, bytes(payload), name)
            except ChildFailed as err:
                failure = failure or err
    if failure is not None:
        raise failure
    return results


# Each file is hashed once (common/sha256.h): the digest lives in the file's extended
# attribute as "<size> <mtime s> <mtime ns> <hex>", valid while size and mtime are unchanged.
SHA256_XATTR = "user.cifarae.sha256"


def _stat_key(st):
    return "%d %d %d " % (st.st_size, st.st_mtime_ns // 1_000_000_000, st.st_mtime_ns % 1_000_000_000)


def open_regular(path):
    """`path` opened for reading, refused (OSError) unless it is a regular file. Opened
    without blocking, as a FIFO's open waits for a writer that may never come."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=0)


def cached_sha256(path):
    """The cached sha256 of `path`, or None when there is none or the file changed since."""
    try:
        with open_regular(path) as f:
            value = os.getxattr(f.fileno(), SHA256_XATTR).decode("ascii", "replace")
            key = _stat_key(os.fstat(f.fileno()))
    except (OSError, AttributeError):
        return None
    if not value.startswith(key):
        return None
    digest = value[len(key):]
    return digest if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) else None


class BackgroundHash:
    """The sha256 of one file, computed in a child from the moment it is created. digest()
    waits for it (OSError when the file cannot be read); cancel() stops it unneeded."""

    BLOCK = 8 << 20

    def __init__(self, path):
        self.path = path
        self._value = None
        self.pid, self._fd = None, None
        cached = cached_sha256(path)
        if cached:  # hashed before (by a tool or an earlier report) and unchanged since
            self._value = ("ok", cached)
            return
        self.pid, self._fd = fork_child(lambda: self._hash(path))

    @classmethod
    def _hash(cls, path):
        h = hashlib.sha256()
        buf = bytearray(cls.BLOCK)
        view = memoryview(buf)
        try:
            with open_regular(path) as f:
                before = os.fstat(f.fileno())
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    h.update(view[:n])  # a view: no copy of the block
                hexdigest = h.hexdigest()
                after = os.fstat(f.fileno())
                if _stat_key(after) == _stat_key(before):
                    try:
                        os.setxattr(f.fileno(), SHA256_XATTR, (_stat_key(after) + hexdigest).encode())
                    except OSError:
                        pass  # no user attributes here: nothing is cached
        except OSError as err:
            return ("oserror", err.errno, err.strerror)
        return ("ok", hexdigest)

    def digest(self):
        if self._value is None:
            with os.fdopen(self._fd, "rb") as pipe_in:
                payload = pipe_in.read()
            self._fd = None
            self._value = _reap(self.pid, payload, f"{self.path}: sha256")
        if self._value[0] == "oserror":
            raise OSError(self._value[1], self._value[2])
        return self._value[1]

    def cancel(self):
        if self._fd is not None:
            kill(self.pid)
            os.close(self._fd)
            self._fd = None


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
    _running.discard(pid)


def kill_all():
    """Kills and reaps every child still running (the report was interrupted or failed)."""
    for pid in list(_running):
        kill(pid)
