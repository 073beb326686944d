// Package agentcli turns settings into the exact invocation of a third-party agent CLI (Codex CLI,
// Claude Code): argv, an explicit environment and the prompt for stdin. It starts nothing; the caller
// runs the Invocation with internal/proc.
package agentcli

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// The versions of the CLIs this package was written and tested against, as installed by
// scripts/install-agent-clis.sh.
const (
	CodexPackage  = "@openai/codex@0.169.0"
	ClaudePackage = "@anthropic-ai/claude-code@2.1.328"
)

// Invocation is one run of an agent CLI: start Argv with exactly Env (nothing inherited), in the
// repository, with Stdin on standard input.
type Invocation struct {
	Argv  []string
	Env   []string // NAME=value, sorted by name
	Stdin []byte   // the prompt
}

// InstallDir is where scripts/install-agent-clis.sh installs the CLIs: $FACTORY_AGENT_CLIS, else
// $HOME/.cache/factory/agent-clis; "" when neither variable is set. getenv is os.Getenv outside tests.
func InstallDir(getenv func(string) string) string {
	if dir := getenv("FACTORY_AGENT_CLIS"); dir != "" {
		return dir
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".cache", "factory", "agent-clis")
	}
	return ""
}

// InstalledBinary is the path of a CLI ("codex" or "claude") that scripts/install-agent-clis.sh put
// in dir. It may not exist.
func InstalledBinary(dir, name string) string {
	return filepath.Join(dir, "node_modules", ".bin", name)
}

// Confinement is how factory confines an agent CLI and every process it starts (see
// docs/agent-clis.md): writes only to workTree, home and a private tmp; readOnly (the repository's
// git directories) read-only even inside workTree; a PID namespace of its own, so that no process of
// the agent sees a process above the CLI (their environment holds the real API key); and the host's
// network with TCP connections only to port, the key proxy's (keyproxy), where Landlock can restrict
// them (ABI 4 or later). port 0 allows no TCP connection.
func Confinement(mode sandbox.Mode, workTree string, readOnly []string, home string, port uint16) sandbox.Request {
	req := sandbox.Request{Mode: mode, WorkTree: workTree, ReadOnly: readOnly, Home: home, PrivatePIDs: true, HostNetwork: true}
	if port != 0 {
		req.ConnectPorts = []uint16{port}
	}
	return req
}

// baseEnv is what every agent CLI gets from the caller's environment: proc's core variables (PATH,
// LANG, LC_*, TERM, TZ, USER, SHELL, TMPDIR, the Go/Python/Rust toolchain locations) so that the CLI
// and the commands it runs work, but no credential, and HOME replaced by the private home so that
// neither the CLI nor the commands it runs read the user's dotfiles (~/.npmrc, ~/.netrc, ~/.ssh...).
func baseEnv(environ []string, home string) map[string]string {
	core, _ := proc.EnvPolicy{Mode: proc.EnvCore}.Environ(environ)
	vars := map[string]string{}
	for _, kv := range core {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	vars["HOME"] = home
	return vars
}

// lookup returns the value of name in environ (the last one wins, as in proc.EnvPolicy).
func lookup(environ []string, name string) (string, bool) {
	value, found := "", false
	for _, kv := range environ {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			value, found = v, true
		}
	}
	return value, found
}

// sortedEnv renders vars as NAME=value, sorted by name.
func sortedEnv(vars map[string]string) []string {
	env := make([]string, 0, len(vars))
	for name, value := range vars {
		env = append(env, name+"="+value)
	}
	slices.Sort(env)
	return env
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkCommon checks the settings both CLIs share; cli names the CLI in errors.
func checkCommon(cli, model, home, baseURL, keyEnv string, prompt []byte) error {
	switch {
	case model == "":
		return errorf(cli, "the model is empty")
	case strings.HasPrefix(model, "-"):
		return errorf(cli, "model %q starts with '-', which the CLI would read as an option", model)
	case strings.ContainsFunc(model, isSpaceOrControl):
		return errorf(cli, "model %q contains white space or control characters", model)
	case home == "":
		return errorf(cli, "the private home directory is empty; create one for the run")
	case !filepath.IsAbs(home):
		return errorf(cli, "the private home directory %q is not an absolute path", home)
	case len(prompt) == 0:
		return errorf(cli, "the prompt is empty")
	case keyEnv != "" && !envName.MatchString(keyEnv):
		return errorf(cli, "API key variable %q is not a valid environment variable name", keyEnv)
	}
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil {
			return errorf(cli, "base URL %q does not parse: %v", baseURL, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errorf(cli, "base URL %q is not an absolute http or https URL", baseURL)
		}
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f || r == utf8.RuneError }

// apiKey returns the value of the API key variable keyEnv from environ, refusing a missing or empty one
// now rather than letting the CLI fail later with a message about its own configuration.
func apiKey(cli string, environ []string, keyEnv string) (string, error) {
	v, ok := lookup(environ, keyEnv)
	if !ok || v == "" {
		return "", errorf(cli, "API key variable %s is not set or empty", keyEnv)
	}
	return v, nil
}

// errorf returns an error about the settings of the named CLI.
func errorf(cli, format string, args ...any) error {
	return fmt.Errorf("%s invocation: %s", cli, fmt.Sprintf(format, args...))
}

// errNotUTF8 is wrapped by tomlString's error.
var errNotUTF8 = errors.New("not valid UTF-8")

// tomlString renders s as a TOML basic string: quotes and backslashes escaped, control characters as
// \uXXXX, everything else (UTF-8) as is.
func tomlString(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errNotUTF8
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\u%04X`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String(), nil
}
