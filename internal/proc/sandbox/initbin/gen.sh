#!/bin/sh
# Builds the sandbox's init (c/init.c) for the architectures package initbin embeds, into the
# directory given (default: here). Run by go generate, and by TestEmbeddedInitIsFresh to compare.
# The program uses no C library, so the only inputs are the source and the compilers, whose
# versions cc.version records: with the same ones, the build is the same byte for byte.
set -eu
out=${1:-.}
here=$(dirname "$0")
flags='-Os -static -nostdlib -ffreestanding -fno-builtin -fno-tree-loop-distribute-patterns
	-fno-stack-protector -fno-asynchronous-unwind-tables -fno-pie -no-pie -Wall -Wextra -Werror
	-Wl,--build-id=none -Wl,-z,noexecstack -s'
: >"$out/cc.version.new"
for target in amd64:x86_64-linux-gnu-gcc arm64:aarch64-linux-gnu-gcc; do
	arch=${target%%:*} cc=${target#*:}
	# shellcheck disable=SC2086 # flags are words
	"$cc" $flags -o "$out/init-linux-$arch" "$here/c/init.c"
	echo "$arch: $("$cc" --version | head -n 1); $("${cc%gcc}ld" --version | head -n 1)" >>"$out/cc.version.new"
done
mv "$out/cc.version.new" "$out/cc.version"
