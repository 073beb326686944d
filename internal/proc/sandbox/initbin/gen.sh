#!/bin/sh
# Builds the sandbox's init for the architectures package initbin embeds, into the directory given
# (default: here). Run by go generate, and by TestEmbeddedInitIsFresh to compare.
set -eu
out=${1:-.}
for arch in amd64 arm64; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' \
		-o "$out/init-linux-$arch" ./initmain
done
go env GOVERSION >"$out/go.version"
