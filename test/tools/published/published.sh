#!/usr/bin/env bash
# published.sh dir MODULE@VERSION       prints the folder of a published Go
#                                       module, downloading it into the
#                                       module cache first.
# published.sh build MODULE@VERSION OUT builds the module's main package to
#                                       OUT, as its own go.mod and go.sum pin
#                                       it.
#
# For functions the real-world corpus composes with whose module cannot be
# a tool dependency: function-auto-ready's module declares the path
# github.com/crossplane/function-auto-ready, which the Go module proxy does
# not serve; it serves the module under crossplane-contrib's path.
set -euo pipefail
cmd=$1 mod=$2
dir="$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
  echo "cannot download $mod (got '$dir')" >&2
  exit 1
fi
case "$cmd" in
  dir) echo "$dir" ;;
  build) cd "$dir" && go build -o "$3" . ;;
  *) echo "usage: $0 dir|build MODULE@VERSION [OUT]" >&2; exit 2 ;;
esac
