#!/usr/bin/env bash
# build.sh — the release build of the proxy's binaries, used by the
# Dockerfile's build stage and by deploy/check.sh, so the commands the image
# runs are the ones the test command exercises.
#
#   bash deploy/build.sh OUTDIR     (from the repository root)
#
# Builds static binaries (CGO_ENABLED=0: no libc, they run on a distroless
# "static" base) with -trimpath (no build paths in the binary) and -s -w (no
# symbol table or DWARF; panics still print file:line). Builds
# ./cmd/calloutctl only when that directory exists, and says so when it does
# not. Prints one line per binary built.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: build.sh OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"

build() {
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$1" "./cmd/$1"
	echo "built $out/$1"
}

build callout-proxy
if [ -d cmd/calloutctl ]; then
	build calloutctl
else
	echo "skipped calloutctl: ./cmd/calloutctl does not exist yet"
fi
