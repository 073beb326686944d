#!/usr/bin/env bash
# The test command: installs what the tests drive for real when it is missing, then runs
# `go test -race ./...` (extra arguments are passed to go test, e.g. scripts/test.sh -run TestBuild).
#
#   - the pinned agent CLIs (Codex, Claude Code) via npm, into $FACTORY_AGENT_CLIS;
#   - Debian's chromium, for the web view's browser tests (apt-get; needs root or sudo);
#   - Debian's gcc, gcc-aarch64-linux-gnu and qemu-user, to rebuild the sandbox's embedded init
#     and run its arm64 build (apt-get);
#   - Debian's cmake and make, for the C/C++ projects' default verification (apt-get); rustup's
#     cargo is looked for in ~/.cargo/bin, where rustup installs it;
#   - the Temporal CLI, for the dev server the scale-out tests start (go install, ~3 minutes once);
#   - Gitea, the real forge the pull-request tests start (scripts/gitea.sh: built from the Go
#     module into ~/.cache/factory/gitea, once; the longest step on a fresh machine). The tests
#     then require it (FACTORY_REQUIRE_GITEA=1): a missing Gitea fails them instead of skipping.
#
# Each step is skipped when the component is present, so a second run starts the tests at once.
# Set FACTORY_TEST_NO_INSTALL=1 to install nothing: the tests that need a missing component then
# skip, each saying what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
export PATH="$PATH:$gobin"
[ -d "$HOME/.cargo/bin" ] && export PATH="$PATH:$HOME/.cargo/bin"
export FACTORY_AGENT_CLIS="${FACTORY_AGENT_CLIS:-$HOME/.cache/factory/agent-clis}"

TEMPORAL_CLI_VERSION=v1.5.1

say() { echo "scripts/test.sh: $*" >&2; }

apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      say "cannot install $* without root or sudo; the tests that need it will skip"
      return 0
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get: install $* yourself; the tests that need it will skip"
    return 0
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

if [ "${FACTORY_TEST_NO_INSTALL:-0}" != 1 ]; then
  missing=()
  for tool in git python3 curl; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v x86_64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc)
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v make >/dev/null 2>&1 || missing+=(make)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} (Debian packages)"
    apt_install "${missing[@]}"
  fi

  # Gitea's build is the longest step on a fresh machine (~17 min of CPU, about half that in
  # wall time on 2 idle cores; a minute when Go's build cache is warm): it starts now, after gcc is
  # there, runs while the steps below download, and is waited for before the tests.
  gitea_pid=""
  if [ -z "${FACTORY_GITEA:-}" ]; then
    gitea_out="$(mktemp)"
    scripts/gitea.sh >"$gitea_out" &
    gitea_pid=$!
  fi

  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    scripts/install-agent-clis.sh >/dev/null
  else
    say "node or npm not found: the tests that drive the real Codex and Claude Code CLIs will skip"
  fi

  if ! command -v temporal >/dev/null 2>&1; then
    say "installing the Temporal CLI $TEMPORAL_CLI_VERSION into $gobin (go install; a few minutes, once)"
    go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION"
  fi

  if [ -n "$gitea_pid" ]; then
    say "waiting for scripts/gitea.sh"
    wait "$gitea_pid" || { cat "$gitea_out" >&2; say "scripts/gitea.sh failed (its output is above)"; exit 1; }
    FACTORY_GITEA="$(tail -n 1 "$gitea_out")"
    rm -f "$gitea_out"
  fi
  export FACTORY_GITEA FACTORY_REQUIRE_GITEA=1
fi

go version
git --version
python3 --version
exec go test -race -timeout 60m "$@" ./...
