#!/usr/bin/env bash
# thirdparty.sh build MODULE COMMIT FOLDER OUT
#   builds a composition function's main package to OUT: from its published
#   module at COMMIT when the Go module proxy serves it, else from the
#   sources of that commit kept in a third_party folder beside the
#   repository (FOLDER is its folder name there).
# thirdparty.sh dir MODULE COMMIT FOLDER
#   prints the folder holding those sources (the package/ folder is there).
#
# The folder is found as $KAUSALITY_THIRD_PARTY/FOLDER, else
# ../shared/third_party/FOLDER next to this clone, else next to the
# repository this clone was cloned from (a CI clone lives elsewhere).
set -euo pipefail
cmd=$1 mod=$2 commit=$3 folder=$4
root="$(cd "$(dirname "$0")/../../.." && pwd)"

published() {
  go mod download -json "$mod@$commit" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

local_copy() {
  local origin candidates=()
  [ -n "${KAUSALITY_THIRD_PARTY:-}" ] && candidates+=("$KAUSALITY_THIRD_PARTY/$folder")
  candidates+=("$root/../shared/third_party/$folder")
  origin="$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)"
  if [ -n "$origin" ] && [ -d "$origin" ]; then
    candidates+=("$origin/../shared/third_party/$folder")
  fi
  for c in "${candidates[@]}"; do
    if [ -f "$c/go.mod" ]; then
      (cd "$c" && pwd)
      return
    fi
  done
  echo "cannot find $mod: the module proxy does not serve $mod@$commit and no third_party copy is in ${candidates[*]}" >&2
  return 1
}

dir="$(published || true)"
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
  dir="$(local_copy)"
fi
case "$cmd" in
  dir) echo "$dir" ;;
  # -buildvcs=false: the copy is not a repository of its own, and the
  # folder holding it may be read-only.
  build) cd "$dir" && go build -buildvcs=false -o "$5" . ;;
  *) echo "usage: $0 dir|build MODULE COMMIT FOLDER [OUT]" >&2; exit 2 ;;
esac
