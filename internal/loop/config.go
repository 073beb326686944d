package loop

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/factory-harness/factory/internal/proc/sandbox"
	"github.com/factory-harness/factory/internal/tomlkeys"
)

// Config is .runner/config.toml. Every key is optional; unknown keys, and
// keys spelled in another case, are errors.
type Config struct {
	MaxAttemptsDefault       int            `toml:"max_attempts_default"`
	MaxIterations            int            `toml:"max_iterations"`
	IterationTimeoutSecs     int            `toml:"iteration_timeout_secs"`
	ExecutorOutputLimitBytes int64          `toml:"executor_output_limit_bytes"`
	GuardOutputLimitBytes    int64          `toml:"guard_output_limit_bytes"`
	Guard                    GuardConfig    `toml:"guard"`
	Executor                 ExecutorConfig `toml:"executor"`
}

// GuardConfig is the [guard] table.
type GuardConfig struct {
	Command []string `toml:"command"` // an argv, run without a shell, cwd the repository root
	PassEnv []string `toml:"pass_env"`
	// Sandbox confines the guard as `factory run --sandbox` confines
	// verification: "auto", "required" or "off" (see docs/sandbox.md).
	Sandbox string `toml:"sandbox"`
}

// ExecutorConfig is the [executor] table.
type ExecutorConfig struct {
	Kind    string   `toml:"kind"`     // "command", "codex" or "claude"
	Command []string `toml:"command"`  // kind "command": the argv
	Model   string   `toml:"model"`    // kinds "codex" and "claude": the model name
	PassEnv []string `toml:"pass_env"` // variables passed on top of the core environment
	// Kinds "codex" and "claude": the provider's endpoint ("" for OpenAI's
	// or Anthropic's own API) and the variable holding its API key (""
	// for DefaultCodexKeyEnv or DefaultClaudeKeyEnv).
	// Kind "command" takes both or neither: the key then reaches the
	// command only through the runner's key proxy (docs/loop.md).
	BaseURL   string `toml:"base_url"`
	APIKeyEnv string `toml:"api_key_env"`
	// Sandbox confines the agent and everything it starts: "auto",
	// "required" or "off" (docs/agent-clis.md#confinement).
	Sandbox string `toml:"sandbox"`
}

// Defaults of Config (docs/loop.md explains the choices).
const (
	DefaultMaxAttempts        = 3
	DefaultMaxIterations      = 50
	DefaultIterationTimeout   = 1800
	DefaultOutputLimitBytes   = 100000
	maxConfiguredOutputLimit  = 1 << 30
	maxConfiguredTimeoutSecs  = 7 * 24 * 3600
	maxConfiguredIterations   = 100000
	maxConfiguredAttemptLimit = 1000
)

// Executor kinds.
const (
	KindCommand = "command"
	KindCodex   = "codex"
	KindClaude  = "claude"
)

// DefaultConfig is the configuration of an empty config.toml.
func DefaultConfig() Config {
	return Config{
		MaxAttemptsDefault:       DefaultMaxAttempts,
		MaxIterations:            DefaultMaxIterations,
		IterationTimeoutSecs:     DefaultIterationTimeout,
		ExecutorOutputLimitBytes: DefaultOutputLimitBytes,
		GuardOutputLimitBytes:    DefaultOutputLimitBytes,
		Guard:                    GuardConfig{Command: []string{"just", "ci"}, Sandbox: string(sandbox.ModeAuto)},
		Executor:                 ExecutorConfig{Kind: KindCommand, Sandbox: string(sandbox.ModeAuto)},
	}
}

// ParseConfig decodes config.toml strictly over the defaults and returns
// every problem found, each as "key: message", sorted. When the TOML does
// not decode, the Config returned is DefaultConfig: the decoder stops
// part-way through tables it visits in no fixed order, so what it had
// filled in would differ from run to run.
func ParseConfig(data []byte) (Config, []string) {
	c := DefaultConfig()
	md, unknown, err := tomlkeys.Decode(string(data), &c)
	var ps []string
	for _, k := range unknown {
		ps = append(ps, fmt.Sprintf("%s: unknown key", k))
	}
	if err != nil && len(ps) == 0 {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return DefaultConfig(), []string{fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message)}
		}
		return DefaultConfig(), []string{err.Error()}
	}
	undecoded := map[string]bool{}
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	trusted := err == nil
	for _, k := range unknown {
		trusted = trusted && undecoded[k]
	}
	if !trusted {
		// A key in another case (`Command`) was decoded into a field, or
		// broke the decoding: which spelling won depends on map order, so
		// the values are not to be trusted and only the keys are reported,
		// the same each time.
		slices.Sort(ps)
		return DefaultConfig(), ps
	}
	ps = append(ps, c.problems()...)
	slices.Sort(ps)
	return c, ps
}

func (c Config) problems() []string {
	var ps []string
	bad := func(key, format string, args ...any) { ps = append(ps, key+": "+fmt.Sprintf(format, args...)) }
	between := func(key string, v, lo, hi int64) {
		if v < lo || v > hi {
			bad(key, "%d is out of range [%d, %d]", v, lo, hi)
		}
	}
	between("max_attempts_default", int64(c.MaxAttemptsDefault), 1, maxConfiguredAttemptLimit)
	between("max_iterations", int64(c.MaxIterations), 1, maxConfiguredIterations)
	between("iteration_timeout_secs", int64(c.IterationTimeoutSecs), 1, maxConfiguredTimeoutSecs)
	between("executor_output_limit_bytes", c.ExecutorOutputLimitBytes, 1, maxConfiguredOutputLimit)
	between("guard_output_limit_bytes", c.GuardOutputLimitBytes, 1, maxConfiguredOutputLimit)
	if len(c.Guard.Command) == 0 || c.Guard.Command[0] == "" {
		bad("guard.command", "must be a non-empty argv such as [\"just\", \"ci\"]")
	}
	if _, err := sandbox.ParseMode(c.Guard.Sandbox); err != nil {
		bad("guard.sandbox", "%v", err)
	}
	if _, err := sandbox.ParseMode(c.Executor.Sandbox); err != nil {
		bad("executor.sandbox", "%v", err)
	}
	switch c.Executor.Kind {
	case KindCommand:
		if len(c.Executor.Command) == 0 || c.Executor.Command[0] == "" {
			bad("executor.command", "required when executor.kind is %q: the argv of the agent program (the prompt arrives on stdin)", KindCommand)
		}
		if c.Executor.Model != "" {
			bad("executor.model", "only for executor.kind %q or %q", KindCodex, KindClaude)
		}
		if (c.Executor.BaseURL == "") != (c.Executor.APIKeyEnv == "") {
			bad("executor", "kind %q takes base_url and api_key_env together: the key reaches the command only through the runner's proxy to base_url", KindCommand)
		} else if p := endpointProblem(c.Executor.BaseURL, c.Executor.APIKeyEnv); c.Executor.BaseURL != "" && p != "" {
			bad("executor", "%s", p)
		}
	case KindCodex, KindClaude:
		if len(c.Executor.Command) > 0 {
			bad("executor.command", "only for executor.kind %q; kind %q builds its own argv", KindCommand, c.Executor.Kind)
		}
		if c.Executor.Model == "" {
			bad("executor.model", "required when executor.kind is %q: the model name the CLI is given", c.Executor.Kind)
		} else if p := agentSettingsProblem(c.Executor); p != "" {
			bad("executor", "%s", p)
		}
	default:
		bad("executor.kind", "%q is not one of %q, %q, %q", c.Executor.Kind, KindCommand, KindCodex, KindClaude)
	}
	if key, _ := c.Executor.endpoint(); key != "" && slices.Contains(c.Executor.PassEnv, key) {
		bad("executor.pass_env", "%s is the API key variable: the agent gets a stand-in key, never the key itself", key)
	}
	for _, n := range append(slices.Clone(c.Executor.PassEnv), c.Guard.PassEnv...) {
		if n == "" || strings.ContainsAny(n, "= ") {
			bad("pass_env", "%q is not a variable name", n)
		}
	}
	return ps
}

// configTemplate is what `factory loop init` writes: every key, commented
// out at its default, and a placeholder executor to replace.
const configTemplate = `# factory loop configuration. Every key is optional; unknown keys are errors.
# The values shown are the defaults. See docs/loop.md.

# max_attempts_default = 3          # attempts of a new leaf (agents may set less, never more)
# max_iterations = 50               # iterations per 'factory loop run'
# iteration_timeout_secs = 1800     # one wall-clock budget for executor + guard
# executor_output_limit_bytes = 100000
# guard_output_limit_bytes = 100000

[guard]
# command = ["just", "ci"]          # an argv, run without a shell in the repository root
# pass_env = []                     # extra environment variables for the guard
# sandbox = "auto"                  # "auto", "required" or "off": confine the guard (docs/sandbox.md)

[executor]
kind = "command"                    # "command", "codex" or "claude"
# The agent program: it gets the prompt pack on stdin and in $FACTORY_LOOP_PROMPT_FILE.
# command = ["my-agent", "--non-interactive"]
# pass_env = []                     # extra environment variables for the agent (never its API key)
# sandbox = "auto"                  # "auto", "required" or "off": confine the agent (docs/agent-clis.md)
# For kind "codex" or "claude" (docs/loop.md):
# model = "..."                     # required: the model name given to the CLI
# base_url = ""                     # "": the provider's own API
# api_key_env = ""                  # "": OPENAI_API_KEY (codex) or ANTHROPIC_API_KEY (claude)
# For kind "command", both or neither: the command gets a stand-in key in api_key_env and the
# runner's key proxy in FACTORY_LOOP_MODEL_URL, which forwards to base_url with the real key.
`
