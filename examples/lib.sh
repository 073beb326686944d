# Shared by the example scripts (sourced, not run).

# example_factory SUBCOMMAND WORK sets $factory: $FACTORY, else a factory on
# PATH that knows SUBCOMMAND (one from before it existed would fail), else one
# built from this checkout into WORK.
example_factory() {
  factory=${FACTORY:-}
  [ -n "$factory" ] && return
  if command -v factory >/dev/null 2>&1 && factory "$1" --help >/dev/null 2>&1; then
    factory=factory
  else
    echo "building factory into $2/factory ..." >&2
    (cd "$(dirname "${BASH_SOURCE[0]}")/.." && go build -buildvcs=auto -o "$2/factory" ./cmd/factory)
    factory=$2/factory
  fi
}

# A fixed identity and dates make the commit hashes the same on every machine.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=Example GIT_AUTHOR_EMAIL=example@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=Example GIT_COMMITTER_EMAIL=example@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z
