#!/usr/bin/env bats
# make install / uninstall into a DESTDIR: binaries, man pages (help2man), bash completion,
# the Lmod modulefile; the Spack recipe and the Apptainer definition checked for what can
# be checked without Spack or Apptainer. help2man and lmod come from make deps; without
# them these tests skip, except under CI=true, where their absence is a failure.
load helpers

PREFIX=/opt/cifar-ae

# Skips (or, under CI, fails) when a command the test needs is missing.
need_command() {
  command -v "$1" >/dev/null && return 0
  [ "${CI:-}" = true ] && { echo "$1 is not installed (make deps installs it)"; return 1; }
  skip "$1 is not installed (make deps installs it)"
}

# The same for Debian's lmod, which puts no command on PATH.
need_lmod() {
  [ -f /usr/share/lmod/lmod/init/profile ] && return 0
  [ "${CI:-}" = true ] && { echo "lmod is not installed (make deps installs it)"; return 1; }
  skip "lmod is not installed (make deps installs it)"
}

tool_names() { for t in "$BIN"/*; do [ -x "$t" ] && basename "$t"; done; }

# Options a tool's --help lists, read independently of tools/dist/bash-completion.sh: every
# -x / --xyz at the start of an option line, before the description.
help_options() {
  "$BIN/$1" --help | grep -E '^ {1,4}-' | sed -E 's/^ +//; s/  .*//' | grep -oE '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' |
    tr -d ' ,' | sort -u
}

setup_file() {
  export DEST="$BATS_FILE_TMPDIR/dest"
  command -v help2man >/dev/null || return 0
  make -s -C "$REPO_ROOT" PREBUILT=1 BUILD="$BUILD" DESTDIR="$DEST" PREFIX="$PREFIX" install >"$BATS_FILE_TMPDIR/install.log" 2>&1 ||
    { cat "$BATS_FILE_TMPDIR/install.log" >&3; return 1; }
}

setup() {
  ROOT="$DEST$PREFIX"
}

@test "make install into DESTDIR: every tool, its man page and completion, the modulefile; the tools run" {
  need_command help2man
  [ -n "$(tool_names)" ]
  for t in $(tool_names); do
    [ -x "$ROOT/bin/$t" ]
    [ -f "$ROOT/share/man/man1/$t.1" ]
    [ "$(readlink "$ROOT/share/bash-completion/completions/$t")" = cifar-ae ]
    run "$ROOT/bin/$t" --version
    [ "$status" -eq 0 ]
    [[ "$output" == "$t 0."* ]]
  done
  [ -f "$ROOT/share/modulefiles/cifar-ae/0.1.0.lua" ]
  # Nothing outside PREFIX.
  [ -z "$(find "$DEST" -mindepth 1 -maxdepth 1 ! -name opt)" ]
}

@test "man -l renders each page: NAME is the tool's purpose, OPTIONS lists what --help lists" {
  need_command help2man
  need_command man
  for t in $(tool_names); do
    [ -n "$(help_options "$t")" ]
    purpose=$("$BIN/$t" --help | sed -n "s/^$t — //p" | head -n 1)
    [ -n "$purpose" ]
    page=$(MANPAGER=cat MANWIDTH=2000 man -l "$ROOT/share/man/man1/$t.1" 2>&1)
    grep -qF "$t - ${purpose:0:40}" <<<"$page" || { echo "$t: NAME is not '$purpose'"; echo "$page" | head; return 1; }
    grep -q "^OPTIONS\|^   options:\|^DESCRIPTION" <<<"$page"
    for opt in $(help_options "$t"); do
      grep -qF -- "$opt" <<<"$page" || { echo "$t: man page lacks $opt"; return 1; }
    done
    # roff has the dash, not bytes a C locale shows as '???'.
    ! grep -q '???' <<<"$page"
  done
}

@test "bash completion: complete -p for each tool; every option of its --help completes, and --device's values" {
  need_command help2man
  source "$ROOT/share/bash-completion/completions/cifar-ae"
  for t in $(tool_names); do
    run complete -p "$t"
    [ "$status" -eq 0 ]
    [[ "$output" == *"-F _cifar_ae_complete"* ]]
    COMP_WORDS=("$t" -) COMP_CWORD=1 COMPREPLY=()
    _cifar_ae_complete "$t"
    completed=" ${COMPREPLY[*]} "
    listed=" $(help_options "$t" | tr '\n' ' ') "
    [ "$listed" != "  " ]
    for opt in $listed; do
      [[ "$completed" == *" $opt "* ]] || { echo "$t: completion lacks $opt (rebuild: make install)"; return 1; }
    done
    # and nothing the tool does not have
    for opt in ${COMPREPLY[@]}; do
      [[ "$listed" == *" $opt "* ]] || { echo "$t: completion offers $opt, which --help lacks"; return 1; }
    done
  done
  COMP_WORDS=(ae-train --device "") COMP_CWORD=2 COMPREPLY=()
  _cifar_ae_complete ae-train
  [ "${COMPREPLY[*]}" = "auto cpu gpu" ]
}

@test "Lmod: module use; module load cifar-ae puts the tools, man pages and completion in reach; unload takes them away" {
  need_command help2man
  need_lmod
  run bash -c '
    set -e
    unset MANPATH
    source /usr/share/lmod/lmod/init/profile
    module use "$1/share/modulefiles"
    module load cifar-ae
    echo "tool=$(command -v ae-train)"
    ae-train --version
    echo "man=$(man -w ae-train)"
    man -w ls >/dev/null && echo "system man pages still found"
    complete -p svm-fit
    module unload cifar-ae
    command -v ae-train || echo "unloaded"' _ "$ROOT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"tool=$ROOT/bin/ae-train"* ]]
  [[ "$output" == *"ae-train 0."* ]]
  [[ "$output" == *"man=$ROOT/share/man/man1/ae-train.1"* ]]
  [[ "$output" == *"complete -o default -F _cifar_ae_complete svm-fit"* ]]
  [[ "$output" == *"unloaded"* ]]
  if [ -f /usr/share/man/man1/ls.1.gz ]; then [[ "$output" == *"system man pages still found"* ]]; fi
}

@test "make man without help2man says so in one line and writes no page" {
  mkdir -p "$BATS_TEST_TMPDIR/b/bin"
  ln -s "$BIN/ae-train" "$BATS_TEST_TMPDIR/b/bin/ae-train"
  run make -s -C "$REPO_ROOT" PREBUILT=1 BUILD="$BATS_TEST_TMPDIR/b" HELP2MAN=/nonexistent/help2man \
    "$BATS_TEST_TMPDIR/b/share/man/man1/ae-train.1"
  [ "$status" -ne 0 ]
  [[ "$output" == *"man pages: '/nonexistent/help2man' not found: install Debian's help2man"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/b/share/man/man1/ae-train.1" ]
}

@test "make uninstall removes every file install put (a second uninstall is harmless)" {
  need_command help2man
  [ -n "$(find "$DEST" ! -type d)" ]
  run make -s -C "$REPO_ROOT" PREBUILT=1 BUILD="$BUILD" DESTDIR="$DEST" PREFIX="$PREFIX" uninstall
  [ "$status" -eq 0 ]
  left=$(find "$DEST" ! -type d)
  [ -z "$left" ] || { echo "left behind: $left"; return 1; }
  [ ! -e "$ROOT/share/modulefiles/cifar-ae" ]
  run make -s -C "$REPO_ROOT" PREBUILT=1 BUILD="$BUILD" DESTDIR="$DEST" PREFIX="$PREFIX" uninstall
  [ "$status" -eq 0 ]
}

@test "Spack recipe: valid Python; CUDA a variant whose cuda_arch feeds CUDA_ARCH; the libraries are dependencies" {
  local pkg="$REPO_ROOT/tools/dist/spack/packages/cifar-ae/package.py"
  run "$PYTHON" - "$pkg" <<'PY'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
assert cls.name == "CifarAe", cls.name
bases = [b.id for b in cls.bases]
assert "MakefilePackage" in bases and "CudaPackage" in bases, bases
calls = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
deps = {n.args[0].value.split()[0].split("~")[0].split("@")[0] for n in calls if n.func.id == "depends_on"}
want = {"hdf5", "openblas", "cli11", "libsvm", "libarchive", "libdeflate", "libpng", "libjpeg-turbo", "openssl",
        "cuda", "python", "py-h5py", "py-numpy", "py-matplotlib", "help2man"}
assert want <= deps, sorted(want - deps)
src = ast.unparse(cls)
assert "CUDA_ARCH=" in src and "cuda_arch" in src and "GPU=0" in src and "INSTALL_DEPS=0" in src
print("ok")
PY
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = ok ]
  grep -q '^  namespace: ' "$REPO_ROOT/tools/dist/spack/repo.yaml"
}

@test "Apptainer definition: a CUDA devel build stage, a runtime stage fed from it, --nv in its help" {
  local def="$REPO_ROOT/tools/dist/apptainer/cifar-ae.def"
  [ "$(grep -c '^Bootstrap: docker$' "$def")" -eq 2 ]
  grep -qE '^From: nvidia/cuda:.*-devel-' "$def"
  grep -qE '^From: nvidia/cuda:.*-runtime-' "$def"
  grep -qx 'Stage: build' "$def"
  grep -qx 'Stage: runtime' "$def"
  for section in %arguments %files %post '%files from build' %environment %runscript %test %help; do
    grep -qx "$section" "$def" || { echo "no $section section"; return 1; }
  done
  grep -q 'CUDA_ARCH=.*{{ CUDA_ARCH }}' "$def"
  grep -q 'PREFIX=/opt/cifar-ae' "$def" && grep -q 'install$' "$def"
  grep -q 'apptainer run --nv' "$def"
  # The runtime stage is the last one: the image holds no compiler.
  [ "$(grep -n '^Stage:' "$def" | tail -n 1 | cut -d: -f3)" = " runtime" ]
}
