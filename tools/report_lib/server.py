"""A report that has imported its libraries before it is asked for: `make pipeline`'s report
stage, served by a process started beside the pipeline's first stage.

The report spends most of its start on importing numpy, h5py and matplotlib (0.6-0.9 s of
its 1.4-1.6 s on an H200 host, docs/DECISIONS.md "The report served by a process that
imported its libraries first"). For `make pipeline`, make starts

    report --serve NAME PID

in the background with PID = make's pid; it imports them while the other stages run and waits
on the abstract UNIX socket NAME. The report stage runs `report` with REPORT_SERVER=NAME in its
environment: that process (hand_over) sends its arguments, environment and umask with its
standard streams and working folder (as file descriptors), and the server runs the
report there, as that process would have, then sends back the exit status, which the first
process exits with. Signals it receives (SIGINT, SIGTERM, SIGHUP) are passed on.

It falls back to running the report itself, silently, whenever the server is not there or
not the right one: no socket by that name, a peer of another user, a different report
program, a different environment (the libraries read theirs as they load), a server that
ends before accepting. One request is served; an idle server ends when PID ends.

This module owns the protocol on both sides. The client side imports only the standard
library, so asking costs no more than the imports it saves."""
import json
import os
import signal
import socket
import struct
import sys

# Variables the shells between make and the report set for themselves, and this mechanism's
# own: never a reason to decline.
VOLATILE_ENV = frozenset(("_", "SHLVL", "PWD", "OLDPWD", "REPORT_SERVER", "REPORT_REEXECUTED"))
ACCEPTED, DECLINED = b"A", b"D"
_LENGTH = struct.Struct("!I")
_STATUS = struct.Struct("!i")
_MAX_REQUEST = 16 << 20  # argv and environment: far below, and a bound on what is read
ANSWER_SECONDS = 60.0  # the longest the asking report waits to be accepted or declined
REQUEST_SECONDS = 5.0  # the longest the server waits for a request once connected


def _address(name):
    return "\0" + name  # the abstract namespace: no file to create, leave behind or clean up


def _peer(sock):
    """(pid, uid) of the process at the other end."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def program_identity(path):
    """What says two report processes run the same program: the file's device, inode, size
    and modification time (a rebuilt or another copy differs)."""
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# ---------------------------------------------------------------------------------------
# The asking side: the report stage's `report`
# ---------------------------------------------------------------------------------------

def hand_over(name):
    """Has the server named `name` run this report. Returns (None) when it will not, and the
    caller runs the report itself; otherwise exits with the served report's status."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    accepted = False
    cwd = None
    handlers = {}

    def pass_on(signum, _frame):
        """Once the server has accepted, a signal is the served report's; before, this
        process's own, as if it had no handler."""
        if accepted:
            try:
                os.kill(server_pid, signum)
            except OSError:
                pass
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    try:
        sock.connect(_address(name))
        server_pid, server_uid = _peer(sock)
        if server_uid != os.getuid():
            return None
        umask = os.umask(0o022)
        os.umask(umask)
        program = os.path.realpath(sys.argv[0])
        request = json.dumps({"argv": sys.argv, "environ": dict(os.environ), "umask": umask, "program": program,
                              "identity": program_identity(program)}).encode()
        cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) != signal.SIG_IGN:  # ignored here: ignored for the report too
                handlers[sig] = signal.signal(sig, pass_on)
        # fds 0-2 closed in this process (a bad cron line) make this fail: the report runs here.
        socket.send_fds(sock, [_LENGTH.pack(len(request)) + request], [0, 1, 2, cwd])
        # The answer comes once the server has imported its libraries (1-3 s after make
        # started it); a server stuck for a minute is given up on.
        sock.settimeout(ANSWER_SECONDS)
        accepted = sock.recv(1) == ACCEPTED
        if not accepted:
            return None
        sock.settimeout(None)
        status = _recv_exactly(sock, _STATUS.size)
    except (OSError, AttributeError):  # AttributeError: a Python before 3.9, without send_fds
        if accepted:
            status = None
        else:
            return None
    finally:
        if cwd is not None:
            os.close(cwd)
        if not accepted:  # the report runs here, as if nothing had been asked
            sock.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    if status is None:
        print("report: error: the report server ended without an exit status", file=sys.stderr)
        sys.exit(1)
    sys.exit(_STATUS.unpack(status)[0])


# ---------------------------------------------------------------------------------------
# The serving side: `report --serve NAME PID`, started by make
# ---------------------------------------------------------------------------------------

def _comparable(environ):
    return {k: v for k, v in environ.items() if k not in VOLATILE_ENV}


class _Watch:
    """Whether process `pid` (make) has ended: a pidfd, readable once it has (opened first, so
    that a pid reused later is never mistaken for it), or where pidfds are missing (Python <
    3.9, Linux < 5.3) a look every 0.2 s."""
    POLL_SECONDS = 0.2

    def __init__(self, pid):
        self.pid, self.fd, self.gone = pid, None, False
        try:
            self.fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.gone = True
        except (AttributeError, OSError):
            pass

    def wait(self, fds):
        """→ the fds of `fds` that are ready, or None once the process has ended."""
        import select
        while True:
            if self.gone:
                return None
            watched = [self.fd] if self.fd is not None else []
            ready, _, _ = select.select(list(fds) + watched, [], [],
                                        None if self.fd is not None else self.POLL_SECONDS)
            if self.fd is not None and self.fd in ready:
                self.gone = True
            elif self.fd is None:
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    self.gone = True
                except PermissionError:
                    pass  # alive, another user's
            if ready and not self.gone:
                return ready


def _import_libraries():
    """Everything a report run imports, and matplotlib's style set: what the served report
    no longer waits for. common first: it sets the BLAS thread count numpy reads as it loads."""
    from . import common  # noqa: F401
    import h5py  # noqa: F401
    import numpy  # noqa: F401
    from . import cli, compare, info, pictures, render  # noqa: F401
    from .plots import setup_matplotlib
    setup_matplotlib()


def _receive_request(conn):
    """→ (request dict, [fd0, fd1, fd2, cwd]) or None when the peer sent no complete one."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, _LENGTH.size + 65536, 8)
    request = None
    try:
        if len(fds) == 4 and len(msg) >= _LENGTH.size:
            (size,) = _LENGTH.unpack(msg[:_LENGTH.size])
            body = msg[_LENGTH.size:]
            while size <= _MAX_REQUEST and len(body) < size:
                chunk = conn.recv(min(size - len(body), 1 << 20))
                if not chunk:
                    break
                body += chunk
            if len(body) == size:
                request = json.loads(body.decode())
    except (ValueError, UnicodeDecodeError, OSError):
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)
        return None
    return request, fds


def _adopt(request, fds):
    """Becomes the asking process: its streams, folder, umask, environment and arguments."""
    sys.stdout.flush()
    sys.stderr.flush()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.fchdir(fds[3])
    os.close(fds[3])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["environ"])
    from .common import apply_environment_defaults
    apply_environment_defaults()
    sys.argv = request["argv"]
    # Python chose stdout's buffering for the /dev/null it started with.
    sys.stdout.reconfigure(line_buffering=os.isatty(1))


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(signum)


def _run_report(request, fds, asker_pid):
    """Becomes the asking process (_adopt) and runs the report as `report` runs it
    (cli.script_main), → its exit status; its start-up counts from the asker's start. A
    signal passed on before the report has set its own handlers ends it as an interrupted
    report, not as a killed server."""
    from .cli import main
    from .common import TOOL, process_start
    started = process_start(asker_pid)  # before the asker can end
    try:
        _adopt(request, fds)
        status = main(sys.argv[1:], started=started)
    except SystemExit as done:  # argparse's usage errors, --help, --version
        status = done.code
    except KeyboardInterrupt as interrupt:  # before cli.main's own handling began
        print(f"{TOOL}: interrupted; no report written", file=sys.stderr)
        status = 128 + int(interrupt.args[0] if interrupt.args else signal.SIGINT)
    except BaseException:  # noqa: BLE001  (a bug: its traceback, as an unserved report would print it)
        import traceback
        traceback.print_exc()
        status = 1
    if status is None:
        return 0
    if not isinstance(status, int):
        print(status, file=sys.stderr)
        return 1
    return status


def serve(name, pid):
    """Serves one report on the abstract socket `name` while process `pid` (make) lives.
    → the exit status of this server: 0, whether or not it served."""
    own_environ = _comparable(os.environ)  # before anything imported changes it
    own_program = os.path.realpath(sys.argv[0])
    try:
        own_identity = program_identity(own_program)
    except OSError:
        return 0
    # Make's terminal signals reach the report through the asking process, once each. A
    # shell starts a background job with SIGINT ignored, and Python keeps it so: the asker's
    # Ctrl-C must interrupt the served report as it would have interrupted the report.
    try:
        os.setsid()
    except OSError:
        pass  # already a group leader: started by hand
    signal.signal(signal.SIGINT, signal.default_int_handler)
    make = _Watch(pid)
    if make.gone:
        return 0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        listener.bind(_address(name))
        listener.listen(4)
    except OSError:
        return 0  # the name is taken: not ours to serve
    # Imported while make runs; a request that comes meanwhile waits in the backlog. An import
    # that fails ends the server: the asking report then runs by itself and says why. A make
    # that ends meanwhile (nothing to do, a failed stage) ends the server at once.
    import threading
    imported_r, imported_w = os.pipe()

    def end_if_make_ends():  # while importing only: no thread is left when a report forks
        if make.wait([imported_r]) is None:
            os._exit(0)
    watcher = threading.Thread(target=end_if_make_ends, daemon=True)
    watcher.start()
    try:
        _import_libraries()
    except Exception:  # noqa: BLE001
        return 0
    os.write(imported_w, b"x")
    watcher.join()
    os.close(imported_r)
    os.close(imported_w)
    while True:
        if make.wait([listener]) is None:
            return 0
        conn, _ = listener.accept()
        try:
            asker_pid, asker_uid = _peer(conn)
            if asker_uid != os.getuid():
                conn.close()
                continue
            conn.settimeout(REQUEST_SECONDS)  # a peer that connects and says nothing
            received = _receive_request(conn)
            conn.settimeout(None)
        except OSError:
            conn.close()
            continue
        if received is None:
            conn.close()
            continue
        request, fds = received
        same = (_comparable(request.get("environ", {})) == own_environ
                and request.get("program") == own_program and request.get("identity") == own_identity)
        if not same:
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(DECLINED)
            except OSError:
                pass
            conn.close()
            continue
        # From here a signal the asker passes on is the report's (cli.main sets the same).
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _interrupt)
        try:
            conn.sendall(ACCEPTED)
        except OSError:  # the asking process is gone
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        listener.close()
        status = _run_report(request, fds, asker_pid)
        # Late signals are no longer the report's; the streams go back to /dev/null so that
        # whoever reads the asking process's output sees its end when that process exits.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass  # a pipe its reader closed
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            conn.sendall(_STATUS.pack(status & 0xFF if status >= 0 else 1))
        except OSError:
            pass
        return 0


def serve_main(args, no_python):
    """`report --serve NAME PID`: → the exit status. Quiet (its streams are make's /dev/null):
    a server that cannot serve leaves each report to run by itself."""
    if len(args) != 2 or not args[1].isdigit():
        print("usage: report --serve NAME PID", file=sys.stderr)
        return 2
    if no_python:
        return 1
    return serve(args[0], int(args[1]))
