#!/usr/bin/env bash
# plain_attempt.sh REPO pass|fail
#
# The git, fsync and exec work of one factory attempt with no harness around
# it: the baseline that bench/overhead_test.go compares factory.Execute with.
# It writes no audit trail, which is exactly the overhead being measured.
#
# Prints "PASS <tree>" or "FAIL"; exits non-zero only if something broke.
# PLAIN_INDEX_SEED=read-tree seeds the tree-hash index the way
# gitws.TreeHash does (no stat data) instead of copying the baseline index.
set -euo pipefail

repo=$1 mode=$2
target=pkg/d00/f0000.py
# Same bytes as newContent in overhead_test.go.
content="print('written by bench')"

# Run true/false as programs: the bash builtins would skip the fork+exec
# that the harness pays for every command.
true_bin=$(type -P true)
case $mode in
pass) accept_bin=$true_bin ;;
fail) accept_bin=$(type -P false) ;;
*) echo "usage: $0 REPO pass|fail" >&2; exit 2 ;;
esac

cd "$repo"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Preflight: the work-tree root, a clean tree, the baseline.
[ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ] || { echo "not the work-tree root" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=all)" ] || { echo "dirty tree" >&2; exit 1; }
head=$(git rev-parse HEAD)
ignored_before=$(git ls-files --others --ignored --exclude-standard)
# The tree is clean, so the index equals HEAD: a copy is read-tree HEAD with
# the stat data that lets add -A skip rehashing unchanged files.
[ "${PLAIN_INDEX_SEED:-copy}" = copy ] && cp .git/index "$scratch/index"

# TR: atomic write, fsync of the file and of its directory. The temp name is
# fixed rather than mktemp'd so it gets the umask's 0644, as the original had.
tmp=$target.plain-tmp.$$
printf '%s\n' "$content" >"$tmp"
sync "$tmp"
mv -f "$tmp" "$target"
sync "${target%/*}"

# PO: one verification command, one acceptance command.
"$true_bin" >"$scratch/verify.log" 2>&1 || { echo "verify failed" >&2; exit 1; }
if "$accept_bin" >"$scratch/accept.log" 2>&1; then
	# PASS: the tree git add -A would stage, without touching the real index.
	export GIT_INDEX_FILE=$scratch/index
	[ "${PLAIN_INDEX_SEED:-copy}" = copy ] || git read-tree HEAD
	git add -A
	echo "PASS $(git write-tree)"
	exit 0
fi

# FAIL: roll back, then check that no ignored file was lost.
git reset -q --hard "$head"
git clean -q -fd
ignored_after=$(git ls-files --others --ignored --exclude-standard)
[ "$ignored_before" = "$ignored_after" ] || { echo "rollback changed ignored files" >&2; exit 1; }
echo FAIL
