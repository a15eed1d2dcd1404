#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets in tests/fuzz/ with Debian's clang (installed
# here with apt-get when missing: `make test` never needs it), makes seed inputs, replays
# tests/fuzz/regressions/, then runs each target for FUZZ_SECONDS (60) and prints a table
# of executions and findings. Exit status 1 when any target found a crash; the crashing
# inputs are left in $BUILD/findings/ — copy each into tests/fuzz/regressions/ (it is then
# replayed by tests/unit/test_reliability.cpp) and fix the reader.
#
#   FUZZ_SECONDS=60 FUZZ_TARGETS="dataset features" BUILD=build-fuzz TOOLS_BUILD=build tests/fuzz/run.sh
#   FUZZ_SECONDS=15 FUZZ_TARGETS="idx cifar100 image libsvm_data libsvm_model" ...   the short
#                         run for CI (~3 min with the build: these targets need common/ only,
#                         libsvm_model also kernels/svm/libsvm_format.cpp)
#   FUZZ_NO_PROBE=1 ...   fuzz HDF5 in-process, without the metadata probe (expect findings
#                         inside libhdf5: that is what the probe contains; see RELIABILITY.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-fuzz}"
TOOLS_BUILD="${TOOLS_BUILD:-build}"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
FUZZ_TARGETS="${FUZZ_TARGETS:-cifar_batch cifar_archive idx cifar100 image dataset features model svm_model libsvm_data libsvm_model}"
PYTHON="${PYTHON:-/usr/bin/python3}"

# ---- clang with libFuzzer ----------------------------------------------------------------------
fuzzer_runtime() { clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null; }
if ! command -v clang++ >/dev/null || [ ! -f "$(fuzzer_runtime)" ]; then
  echo "fuzz: installing clang and libclang-rt-dev (libFuzzer)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >&2
fi

# ---- build: the library sources the readers need, instrumented, then one binary a target -------
HDF5_CFLAGS=$(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HDF5_LIBS=$(pkg-config --libs hdf5 2>/dev/null || echo "-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5")
# OpenMP pragmas are left out (clang here has no libomp); the readers' loops run serially and
# omp_* calls resolve in libgomp.
CXXFLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
  -Wno-unknown-pragmas -I. $HDF5_CFLAGS -DCIFARAE_VERSION=\"fuzz\")
LIBS=($HDF5_LIBS -larchive -ldeflate -lcrypto -lpng -ljpeg -lsvm -lopenblas -lgomp -lm -lpthread)
mkdir -p "$BUILD/obj" "$BUILD/findings" "$BUILD/logs"
# The readers of idx, cifar100, image and libsvm data live in common/ alone, the libsvm model
# reader in common/ and one kernels/svm file: a run of only those targets (the short CI run)
# compiles no other kernels.
common_only() { case $1 in idx|cifar100|image|libsvm_data) return 0 ;; *) return 1 ;; esac; }
libsvm_model_src=kernels/svm/libsvm_format.cpp
need_kernels=0
for t in $FUZZ_TARGETS; do common_only "$t" || [ "$t" = libsvm_model ] || need_kernels=1; done
kernel_srcs=""
case " $FUZZ_TARGETS " in *" libsvm_model "*) kernel_srcs=$libsvm_model_src ;; esac
[ $need_kernels -eq 1 ] && kernel_srcs=$(find kernels -name "*.cpp" | sort)
objs=() common_objs=()
for src in common/*.cpp $kernel_srcs; do
  obj="$BUILD/obj/${src%.cpp}.o"
  objs+=("$obj")
  case $src in common/*) common_objs+=("$obj") ;; esac
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find common kernels -name '*.h' -newer "$obj" 2>/dev/null | head -1)" ]; then
    mkdir -p "$(dirname "$obj")"
    echo "fuzz: clang++ $src" >&2
    clang++ "${CXXFLAGS[@]}" -c "$src" -o "$obj"
  fi
done
for t in $FUZZ_TARGETS; do
  bin="$BUILD/fuzz_$t"
  if [ ! -f "$bin" ] || [ -n "$(find tests/fuzz common kernels -newer "$bin" -name '*.[ch]*' 2>/dev/null | head -1)" ]; then
    echo "fuzz: linking $bin" >&2
    if common_only "$t"; then link_objs=("${common_objs[@]}")
    elif [ "$t" = libsvm_model ]; then link_objs=("${common_objs[@]}" "$BUILD/obj/${libsvm_model_src%.cpp}.o")
    else link_objs=("${objs[@]}"); fi
    clang++ "${CXXFLAGS[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.cpp" "${link_objs[@]}" "${LIBS[@]}" -o "$bin"
  fi
done

# ---- seeds --------------------------------------------------------------------------------------
seeds="$BUILD/seeds"
if [ ! -f "$seeds/.done-v3" ]; then
  rm -rf "$seeds" && mkdir -p "$seeds"/{cifar_batch,cifar_archive,idx,cifar100,image,dataset,features,model,svm_model}
  gen="$BUILD/gen" && rm -rf "$gen" && mkdir -p "$gen"
  "$PYTHON" tests/helpers/gen_cifar.py "$gen" --tar "$gen/full.tar.gz" >/dev/null
  b="$gen/cifar-10-batches-bin"
  head -c $((3073 * 3)) "$b/data_batch_1.bin" >"$seeds/cifar_batch/three_records"
  head -c 3073 "$b/test_batch.bin" >"$seeds/cifar_batch/one_record"
  # Archives of the right layout but one-record batches: every path up to the size check.
  mkdir -p "$gen/small/cifar-10-batches-bin"
  for f in "$b"/*.bin; do head -c 3073 "$f" >"$gen/small/cifar-10-batches-bin/$(basename "$f")"; done
  tar -czf "$seeds/cifar_archive/small.tar.gz" -C "$gen/small" cifar-10-batches-bin
  tar -cf "$seeds/cifar_archive/small.tar" -C "$gen/small" cifar-10-batches-bin
  # IDX: small valid files (raw and gzip) and the lying inputs of the reliability tests.
  "$PYTHON" - "$seeds/idx" "$seeds/cifar100" "$gen" <<'PY'
import gzip, io, os, struct, sys, tarfile
idx, c100, gen = sys.argv[1:4]
images = bytes([0, 0, 8, 3]) + struct.pack(">III", 3, 4, 4) + bytes(range(1, 49))
labels = bytes([0, 0, 8, 1]) + struct.pack(">I", 3) + bytes([1, 7, 9])
open(f"{idx}/images", "wb").write(images)
open(f"{idx}/labels", "wb").write(labels)
open(f"{idx}/images.gz", "wb").write(gzip.compress(images))
open(f"{idx}/labels.gz", "wb").write(gzip.compress(labels))
rec = lambda i: bytes([i % 20, i % 100]) + bytes((i * 7 + k) % 251 + 1 for k in range(3072))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for name, data in (("train.bin", rec(1) + rec(2)), ("test.bin", rec(3)),
                       ("fine_label_names.txt", "".join(f"c{i}\n" for i in range(100)).encode())):
        info = tarfile.TarInfo("cifar-100-binary/" + name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
open(f"{c100}/small.tar.gz", "wb").write(buf.getvalue())
open(f"{c100}/train.bin", "wb").write(rec(1) + rec(2))
PY
  "$PYTHON" tests/helpers/lying_inputs.py idx-trailer "$gen/lie" && cp "$gen/lie/train-images-idx3-ubyte.gz" "$seeds/idx/lie.gz"
  "$PYTHON" tests/helpers/lying_inputs.py cifar100-tar "$seeds/cifar100/lie.tar.gz"
  # Images: the committed fixtures (CMYK, YCCK) and small PNG/JPEG of every colour type.
  cp tests/fixtures/jpeg/*.jpg "$seeds/image/"
  for kind in png-lie jpeg-lie jpeg-prog; do
    "$PYTHON" tests/helpers/lying_inputs.py "$kind" "$gen/$kind"
    cp "$gen/$kind"/train/a/x.* "$seeds/image/$kind.$( [ $kind = png-lie ] && echo png || echo jpg)"
  done
  "$PYTHON" - "$seeds/image" <<'PY' || true
import sys
try:
    from PIL import Image
except ImportError:
    sys.exit(0)
out = sys.argv[1]
for mode in ("L", "LA", "RGB", "RGBA", "P", "1", "I;16"):
    im = Image.new(mode, (9, 7))
    im.putdata([(i * 37) % 256 if mode not in ("RGB", "RGBA", "LA") else
                tuple((i * k * 13) % 256 for k in range(1, len(mode) + 1)) for i in range(63)])
    im.save(f"{out}/{mode.replace(';', '')}.png")
Image.new("RGB", (9, 7), (200, 30, 90)).save(f"{out}/progressive.jpg", progressive=True)
Image.new("L", (9, 7), 77).save(f"{out}/gray.jpg")
PY
  "$PYTHON" tests/helpers/badh5.py dataset "$seeds/dataset/h5py.h5" --train 12 --test 10
  "$PYTHON" tests/helpers/badh5.py features "$seeds/features/h5py.h5" --train 12 --test 6 --dim 16
  if [ -x "$TOOLS_BUILD/bin/cifar-convert" ]; then
    "$TOOLS_BUILD/bin/cifar-convert" -q --input "$b" --train-limit 20 --test-limit 10 -o "$seeds/dataset/convert.h5"
  fi
  if [ -x "$TOOLS_BUILD/bin/svm-fit" ]; then
    "$TOOLS_BUILD/bin/svm-fit" -q --features "$seeds/features/h5py.h5" -o "$seeds/svm_model/svm.h5"
    # A nystroem model (svm-fit --approx): the /approx group's reader.
    "$TOOLS_BUILD/bin/svm-fit" -q --features "$seeds/features/h5py.h5" --approx nystroem:6 --device cpu \
      -o "$seeds/svm_model/nystroem.h5"
  fi
  if [ -x "$TOOLS_BUILD/bin/ae-train" ]; then
    # sgd without momentum: no optimizer moments, the smallest valid model (~3 MB).
    "$TOOLS_BUILD/bin/ae-train" -q --data "$seeds/dataset/h5py.h5" --train-limit 4 --epochs 1 --batch-size 4 \
      --optimizer sgd --threads 1 -o "$seeds/model/model.h5"
    if [ -x "$TOOLS_BUILD/bin/ae-encode" ]; then
      "$TOOLS_BUILD/bin/ae-encode" -q --model "$seeds/model/model.h5" --data "$seeds/dataset/h5py.h5" --split test \
        -o "$seeds/features/encoded.h5"
    fi
  fi
  rm -rf "$gen"
  touch "$seeds/.done-v3"
fi

# libsvm text: a model svm-train writes (3 classes, probability sigmoids; a hand-written one
# where libsvm-tools are missing) and the rows it was trained on.
if [ ! -f "$seeds/.done-libsvm" ]; then
  mkdir -p "$seeds/libsvm_model" "$seeds/libsvm_data"
  "$PYTHON" - "$seeds/libsvm_data/rows.libsvm" <<'PY'
import random, sys
random.seed(3)
centre = {7: (1, 1, 0), -2: (-1, 0, 1), 4: (0, -1, 0)}
with open(sys.argv[1], "w") as f:
    for i in range(45):
        y = (7, -2, 4)[i % 3]
        f.write(f"{y} " + " ".join(f"{k + 1}:{c + random.gauss(0, 0.5):.5g}" for k, c in enumerate(centre[y])) + "\n")
PY
  printf '1 1:0.5 3:-2\n-1 2:1e-3\n3\n' >"$seeds/libsvm_data/sparse.libsvm"
  if command -v svm-train >/dev/null; then
    svm-train -q -b 1 -g 0.5 "$seeds/libsvm_data/rows.libsvm" "$seeds/libsvm_model/trained.model"
    svm-train -q -t 0 "$seeds/libsvm_data/rows.libsvm" "$seeds/libsvm_model/linear.model"
  fi
  printf '%s\n' "svm_type c_svc" "kernel_type rbf" "gamma 0.5" "nr_class 2" "total_sv 3" "rho 0.25" "label 1 -1" \
    "probA -1.5" "probB 0.1" "nr_sv 2 1" "SV" "1 1:0.5 3:1" "0.5 2:-1" "-1.5 1:1 2:2 3:-0.5" \
    >"$seeds/libsvm_model/hand.model"
  touch "$seeds/.done-libsvm"
fi

# ---- run ----------------------------------------------------------------------------------------
# The metadata probe's forked child runs libhdf5's out-of-bounds reads on purpose (that is
# what it contains); tests/fuzz/asan.supp keeps ASan's interceptors quiet about reads made
# by libhdf5 itself. Allocation failures are answers, not crashes (the probe's memory limit).
export ASAN_OPTIONS="${ASAN_OPTIONS:-suppressions=$PWD/tests/fuzz/asan.supp:allocator_may_return_null=1:detect_leaks=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Inputs that make HDF5 loop forever end at the probe's alarm; 2 s instead of 20 keeps the
# fuzzers executing. They show up as libFuzzer "slow units" (listed, not counted as findings).
export CAE_HDF5_PROBE_SECONDS="${CAE_HDF5_PROBE_SECONDS:-2}"
status=0
printf '%-14s %8s %10s %8s %7s %9s %6s\n' target seconds executions exec/s corpus findings slow | tee "$BUILD/summary.txt"
for t in $FUZZ_TARGETS; do
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  log="$BUILD/logs/$t.log"
  # Replay every regression input of this kind first (one execution each).
  case $t in
    cifar_batch) pat='*.bin' ;; cifar_archive) pat='*.tar*' ;; idx) pat='*.idx*' ;; cifar100) pat='*.c100*' ;;
    image) pat='*.[jp][pn]g' ;; libsvm_model) pat='*.model' ;; libsvm_data) pat='*.libsvm' ;; *) pat='*.h5' ;;
  esac
  regs=$(find tests/fuzz/regressions -name "$pat" 2>/dev/null | sort)
  if [ -n "$regs" ]; then
    # shellcheck disable=SC2086
    "$BUILD/fuzz_$t" -runs=1 $regs >"$BUILD/logs/$t.replay.log" 2>&1 || {
      echo "fuzz: $t crashed on a regression input, see $BUILD/logs/$t.replay.log" >&2
      status=1
    }
  fi
  # Findings: crashes, sanitizer reports, leaks, out-of-memory and timeouts (over 30 s, past
  # the probe's limit). Slow units (>= 10 s) are counted apart.
  count() { ls "$BUILD/findings" | grep -cE "^$t-$1" || true; }
  before=$(count '(crash|leak|oom|timeout)-')
  slow_before=$(count 'slow-unit-')
  dict=()
  case $t in
    cifar_batch|cifar_archive|idx|cifar100|image) ;;
    libsvm_model|libsvm_data) dict=(-dict=tests/fuzz/libsvm.dict) ;;
    *) dict=(-dict=tests/fuzz/hdf5.dict) ;;
  esac
  set +e
  "$BUILD/fuzz_$t" "$corpus" "$seeds/$t" "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=30 \
    -rss_limit_mb=3072 -malloc_limit_mb=2048 -max_len=$((4 << 20)) -print_final_stats=1 \
    -artifact_prefix="$BUILD/findings/$t-" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  found=$(( $(count '(crash|leak|oom|timeout)-') - before ))
  slow=$(( $(count 'slow-unit-') - slow_before ))
  [ "$rc" -ne 0 ] && [ "$found" -eq 0 ] && found=1  # died without leaving an artifact
  [ "$found" -gt 0 ] && status=1
  printf '%-14s %8s %10s %8s %7s %9s %6s\n' "$t" "${secs:-$FUZZ_SECONDS}" "${execs:-?}" \
    "$(( ${execs:-0} / (${secs:-$FUZZ_SECONDS} > 0 ? ${secs:-$FUZZ_SECONDS} : 1) ))" \
    "$(ls "$corpus" | wc -l)" "$found" "$slow" | tee -a "$BUILD/summary.txt"
done
[ "$status" -eq 0 ] || echo "fuzz: findings in $BUILD/findings/ (logs in $BUILD/logs/)" >&2
exit "$status"
