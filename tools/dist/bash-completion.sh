#!/usr/bin/env bash
# Writes the bash completion of the toolkit's tools, generated from each tool's own --help
# so it never lists an option a tool lacks nor misses one it has (tests/bats/install.bats
# checks both against the installed tools). One file for all the tools: options, and the
# values of options that list them ({auto,cpu,gpu}); anything else completes file names.
#   tools/dist/bash-completion.sh TOOL_PATH... > cifar-ae.bash
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 TOOL_PATH..." >&2; exit 2; }

# The option names of one --help (CLI11's "  -o,--output TEXT" and argparse's
# "  -o DIR, --output DIR" lines alike), one per line.
options_of() {
  "$1" --help | sed -n 's/^ \{1,4\}\(-[^ ].*\)$/\1/p' | while read -r line; do
    # The option part ends where two spaces start the description.
    spec=${line%%  *}
    grep -oE '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' <<<"$spec" | tr -d ' ,' || true
  done | sort -u
}

# "--device auto cpu gpu" for each option whose --help lists its values in braces.
choices_of() {
  "$1" --help | sed -n 's/^ \{1,4\}\(-[^ ].*\)$/\1/p' | while read -r line; do
    spec=${line%%  *}
    values=$(grep -oE '\{[^}]*\}' <<<"$spec" | head -n 1 | tr -d '{}' | tr ',' ' ') || true
    [ -n "$values" ] || continue
    for name in $(grep -oE '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' <<<"$spec" | tr -d ' ,'); do
      echo "$name $values"
    done
  done
}

names=()
cat <<'HEAD'
# bash completion for the cifar-ae tools. Generated from each tool's --help by
# tools/dist/bash-completion.sh at build time; do not edit.
_cifar_ae_complete() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=
  [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
  local opts= choices=
  case "${1##*/}" in
HEAD
for tool in "$@"; do
  name=$(basename "$tool")
  names+=("$name")
  opts=$(options_of "$tool" | tr '\n' ' ')
  printf '    %q)\n      opts=%q\n      case "$prev" in\n' "$name" "${opts% }"
  while read -r opt values; do
    [ -n "$opt" ] || continue
    printf '        %q) choices=%q ;;\n' "$opt" "$values"
  done < <(choices_of "$tool")
  printf '      esac ;;\n'
done
cat <<'TAIL'
  esac
  if [ -n "$choices" ]; then
    COMPREPLY=($(compgen -W "$choices" -- "$cur"))
  elif [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
}
TAIL
printf 'complete -o default -F _cifar_ae_complete'
printf ' %q' "${names[@]}"
printf '\n'
