#!/usr/bin/env bash
# build.sh — the release build of the proxy's binaries, used by the
# Dockerfile's build stage and by deploy/check.sh, so the commands the image
# runs are the ones the test command exercises.
#
#   bash deploy/build.sh OUTDIR     (from the repository root)
#
# Builds static binaries (CGO_ENABLED=0: no libc, they run on a distroless
# "static" base) with -trimpath (no build paths in the binary) and -s -w (no
# symbol table or DWARF; panics still print file:line), stamped with
# -ldflags -X so that `callout-proxy version`, `calloutctl version`,
# /healthz and callout_build_info say which build runs:
#   main.version    $CALLOUT_VERSION, else `git describe --tags --always
#                   --dirty`, else left to the Go toolchain's module version
#   main.commit     $CALLOUT_COMMIT, else `git rev-parse HEAD` (+"-dirty")
#   main.buildDate  $CALLOUT_BUILD_DATE, else $SOURCE_DATE_EPOCH, else now
#                   (RFC 3339, UTC)
# The Dockerfile passes the three from its build arguments (the build
# context has no .git). Builds ./cmd/calloutctl only when that directory
# exists, and says so when it does not. Prints one line per binary built.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: build.sh OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"

git_ok() { command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; }
version=${CALLOUT_VERSION:-}
commit=${CALLOUT_COMMIT:-}
build_date=${CALLOUT_BUILD_DATE:-}
if git_ok; then
	[ -n "$version" ] || version=$(git describe --tags --always --dirty 2>/dev/null || true)
	if [ -z "$commit" ]; then
		commit=$(git rev-parse HEAD)
		git diff --quiet HEAD -- 2>/dev/null || commit+="-dirty"
	fi
fi
if [ -z "$build_date" ]; then
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		build_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
	else
		build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	fi
fi
stamp=""
[ -z "$version" ] || stamp+=" -X main.version=$version"
[ -z "$commit" ] || stamp+=" -X main.commit=$commit"
stamp+=" -X main.buildDate=$build_date"

build() {
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w$stamp" -o "$out/$1" "./cmd/$1"
	echo "built $out/$1 (${version:-module version}, ${commit:-no commit}, $build_date)"
}

build callout-proxy
if [ -d cmd/calloutctl ]; then
	build calloutctl
else
	echo "skipped calloutctl: ./cmd/calloutctl does not exist yet"
fi
