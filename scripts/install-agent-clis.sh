#!/usr/bin/env bash
# Installs the pinned agent CLIs that the codex and claude executors were written against, into a
# private npm prefix (never globally), and prints the two binary paths.
#
#   scripts/install-agent-clis.sh [DIR]
#
# DIR defaults to $FACTORY_AGENT_CLIS, else ~/.cache/factory/agent-clis; the tests look there too.
# Running it again with the pinned versions in place changes nothing and downloads nothing.
set -euo pipefail

CODEX_PKG=@openai/codex
CODEX_VERSION=0.169.0
CLAUDE_PKG=@anthropic-ai/claude-code
CLAUDE_VERSION=2.1.328

DIR=${1:-${FACTORY_AGENT_CLIS:-$HOME/.cache/factory/agent-clis}}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-agent-clis: $tool is not on PATH; the agent CLIs need Node.js and npm" >&2
    exit 1
  fi
done

# installed_version PKG prints the version of PKG under DIR, or nothing when it is absent.
installed_version() {
  local manifest="$DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

codex_bin="$DIR/node_modules/.bin/codex"
claude_bin="$DIR/node_modules/.bin/claude"

if [ "$(installed_version "$CODEX_PKG")" = "$CODEX_VERSION" ] &&
  [ "$(installed_version "$CLAUDE_PKG")" = "$CLAUDE_VERSION" ] &&
  [ -x "$codex_bin" ] && [ -x "$claude_bin" ]; then
  echo "install-agent-clis: $CODEX_PKG@$CODEX_VERSION and $CLAUDE_PKG@$CLAUDE_VERSION already in $DIR" >&2
else
  mkdir -p "$DIR"
  echo "install-agent-clis: installing $CODEX_PKG@$CODEX_VERSION and $CLAUDE_PKG@$CLAUDE_VERSION into $DIR" >&2
  # --save-exact pins the versions in DIR's package.json; audit and fund only add network noise.
  npm install --prefix "$DIR" --save-exact --no-audit --no-fund --loglevel=error \
    "$CODEX_PKG@$CODEX_VERSION" "$CLAUDE_PKG@$CLAUDE_VERSION" >&2
  for bin in "$codex_bin" "$claude_bin"; do
    if [ ! -x "$bin" ]; then
      echo "install-agent-clis: npm finished but $bin is missing or not executable" >&2
      exit 1
    fi
  done
fi

echo "$codex_bin"
echo "$claude_bin"
