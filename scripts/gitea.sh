#!/usr/bin/env bash
# Builds the pinned Gitea the forge tests run (internal/forge/forgetest.StartGitea) and caches it:
#
#   scripts/gitea.sh [CACHE_DIR]     # default $HOME/.cache/factory/gitea/v1.26.0
#
# CACHE_DIR/gitea is the binary (sqlite only, no bindata) and CACHE_DIR/static its STATIC_ROOT_PATH
# (public/, templates/, options/ of the same source). The binary is renamed into place last, so
# its presence means the cache is complete; a second run prints the path and does nothing.
#
# Gitea is served by the Go module proxy, but `go install` refuses it (replace directives), so it
# is built in a writable copy of the downloaded module directory. Long: ~17 minutes of CPU
# (measured: 800 s user + 232 s system, 1.4 GB peak; 42 minutes of wall time at `nice -n 19` on a
# 2-core machine with a load of 12), about a minute when Go's build cache already holds it.
# The static files are the source's: the web pages render, but without their JavaScript and CSS
# (Gitea's frontend is built with pnpm, which this skips); the API and git over HTTP are complete.
# GITEA_GOFLAGS adds flags to `go build`.
# The last line on stdout is the binary's path.
set -euo pipefail
export PATH="/usr/local/go/bin:$PATH"

GITEA_VERSION=v1.26.0
cache="${1:-$HOME/.cache/factory/gitea/$GITEA_VERSION}"
tags='sqlite sqlite_unlock_notify'

say() { echo "scripts/gitea.sh: $(date +%H:%M:%S) $*" >&2; }

if [ -x "$cache/gitea" ] && [ -d "$cache/static/templates" ]; then
  say "gitea $GITEA_VERSION is built: $cache/gitea"
  echo "$cache/gitea"
  exit 0
fi

start=$SECONDS
command -v gcc >/dev/null 2>&1 || { say "gcc not found: Gitea's sqlite driver needs cgo"; exit 1; }
mkdir -p "$cache"
work="$(mktemp -d "${TMPDIR:-/tmp}/gitea-build.XXXXXX")"
trap 'rm -rf "$work"; rm -rf "$cache/gitea.tmp" "$cache/static.tmp"' EXIT

say "downloading code.gitea.io/gitea@$GITEA_VERSION (go mod download)"
moddir="$(go mod download -json "code.gitea.io/gitea@$GITEA_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[ -n "$moddir" ] && [ -f "$moddir/go.mod" ] || { say "go mod download gave no module directory"; exit 1; }

say "copying $moddir to $work/src"
cp -r "$moddir" "$work/src"
chmod -R u+w "$work/src"

say "building (go build -tags '$tags'; ~17 min of CPU)"
# -buildvcs=false: the copy is no repository; the version goes in with -X as Gitea's Makefile does
# (clients such as code.gitea.io/sdk/gitea parse /api/v1/version; "development" does not parse).
(
  cd "$work/src"
  # shellcheck disable=SC2086 # GITEA_GOFLAGS is a list of flags
  CGO_ENABLED=1 go build -trimpath -buildvcs=false ${GITEA_GOFLAGS:-} -tags "$tags" \
    -ldflags "-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=$tags'" \
    -o "$cache/gitea.tmp" .
)

say "keeping the static files (public, templates, options) in $cache/static"
rm -rf "$cache/static.tmp"
mkdir -p "$cache/static.tmp"
cp -r "$work/src/public" "$work/src/templates" "$work/src/options" "$cache/static.tmp/"
rm -rf "$cache/static"
mv "$cache/static.tmp" "$cache/static"
mv "$cache/gitea.tmp" "$cache/gitea"

"$cache/gitea" --version >&2
elapsed=$((SECONDS - start))
say "built gitea $GITEA_VERSION in $((elapsed / 60))m$((elapsed % 60))s: $cache/gitea"
echo "$cache/gitea"
