"""A fresh process's CUDA driver start, alone and beside another process that holds the
driver in one of several ways (docs/BENCHMARKS.md, "The CUDA driver held through the
pipeline").

    python3 bench/driver_start.py [ROUNDS]

Each measurement is a new Python process that calls cuInit, then makes the primary context
and a 1 MB allocation, timed inside it. Prints one line per holder: dlopen, cuInit and
context seconds of each round.
"""
import subprocess
import sys
import time

PROBE = r'''
import ctypes, time
t0 = time.time(); cuda = ctypes.CDLL("libcuda.so.1"); t1 = time.time(); cuda.cuInit(0); t2 = time.time()
dev = ctypes.c_int(); cuda.cuDeviceGet(ctypes.byref(dev), 0); ctx = ctypes.c_void_p()
cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev); cuda.cuCtxSetCurrent(ctx)
p = ctypes.c_void_p(); cuda.cuMemAlloc_v2(ctypes.byref(p), 1 << 20); t3 = time.time()
print("%.3f %.3f %.3f" % (t1 - t0, t2 - t1, t3 - t2))
'''

_CUINIT = "import ctypes; c = ctypes.CDLL('libcuda.so.1'); c.cuInit(0)"
_CONTEXT = (_CUINIT + "; d = ctypes.c_int(); c.cuDeviceGet(ctypes.byref(d), 0); x = ctypes.c_void_p(); "
            "c.cuDevicePrimaryCtxRetain(ctypes.byref(x), d); c.cuCtxSetCurrent(x); p = ctypes.c_void_p(); "
            "c.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)")
_WAIT = "; import time; print('ready', flush=True); time.sleep(600)"
HOLDERS = {
    "none": None,
    "device files open": "import os; fds = [os.open(p, os.O_RDWR) for p in ('/dev/nvidiactl', '/dev/nvidia0')]" + _WAIT,
    "nvmlInit": "import ctypes; ctypes.CDLL('libnvidia-ml.so.1').nvmlInit_v2()" + _WAIT,
    "cuInit": _CUINIT + _WAIT,
    "a context": _CONTEXT + _WAIT,
}


def probe():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.split()]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = {name: [] for name in HOLDERS}
    for _ in range(rounds):
        for name, code in HOLDERS.items():
            holder = None
            if code:
                holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
                holder.stdout.readline()
                time.sleep(0.3)
            else:
                time.sleep(1.0)  # any earlier holder's exit is over
            results[name].append(probe())
            if holder:
                holder.kill()
                holder.wait()
            time.sleep(1.0)
    for name, rows in results.items():
        print(f"{name:18s} " + "  ".join("dlopen %.3f cuInit %.3f context %.3f" % tuple(r) for r in rows))


if __name__ == "__main__":
    main()
