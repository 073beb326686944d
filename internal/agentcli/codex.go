package agentcli

import "regexp"

// DefaultCodexProvider is the provider id Codex calls a custom base URL when CodexConfig.ProviderID is
// empty.
const DefaultCodexProvider = "factory"

// CodexConfig says how to run Codex CLI for one session.
type CodexConfig struct {
	// Binary is the codex program: a path, or "" for "codex" looked up on PATH. The npm package's codex
	// is a Node script, so PATH (from Environ) must also reach node.
	Binary string
	Model  string // required, as -m
	// BaseURL is a Responses-API endpoint, such as "http://127.0.0.1:8080/v1"; Codex then talks to it
	// as a custom provider named ProviderID with wire_api "responses". "" means Codex's own default
	// provider (OpenAI) and account.
	BaseURL    string
	ProviderID string // the provider's id with BaseURL: [a-z0-9_-]+; "" means DefaultCodexProvider
	// APIKeyEnv names the variable of Environ that holds the API key. With BaseURL it is required and
	// passed under its own name as the provider's env_key. Without, it is optional and passed as
	// CODEX_API_KEY, the key codex exec reads; leave it empty to use a `codex login` stored in Home.
	APIKeyEnv string
	// Home is a private, existing, absolute directory for CODEX_HOME and HOME: Codex keeps its
	// config, sessions and logs there, and neither it nor the commands it runs read the user's
	// ~/.codex or dotfiles. The caller creates it (outside the repository) and removes it.
	Home    string
	Prompt  []byte   // the prompt, given on stdin
	Environ []string // the caller's environment (os.Environ()) from which the allow-list is taken
	// Confined says the caller runs the CLI inside factory's sandbox (see Confinement). Codex's own
	// sandbox is then turned off (--sandbox danger-full-access): its bubblewrap cannot mount inside
	// factory's, and factory's already keeps writes to the work tree and .git read-only.
	Confined bool
}

var providerID = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Codex returns the invocation of `codex exec` for cfg:
//
//	codex exec --sandbox workspace-write|danger-full-access --skip-git-repo-check -m <model>
//	    [-c model_provider=<id> -c 'model_providers.<id>={name="<id>",base_url="<url>",env_key="<VAR>",wire_api="responses"}']
//	    [-c 'shell_environment_policy.exclude=["<KEY VAR>"]']
//
// with the prompt on stdin. workspace-write lets the agent write in its working directory (the
// repository) without asking, and keeps .git read-only, so only the runner commits; with Confined,
// factory's sandbox does that instead and Codex's is off (danger-full-access). The exclude
// option, given whenever a key is passed, keeps the key out of the commands the agent runs: Codex
// would otherwise pass it on to them, and so to the code the model writes.
//
// Env is proc's core allow-list (PATH, LANG, LC_*, TERM, TZ, USER, LOGNAME, SHELL, TMPDIR and the
// Go/Python/Rust toolchain variables) plus CODEX_HOME=Home, HOME=Home, and the API key: <VAR> with a
// BaseURL, CODEX_API_KEY without. Nothing else of Environ is passed.
func Codex(cfg CodexConfig) (Invocation, error) {
	const cli = "codex"
	if err := checkCommon(cli, cfg.Model, cfg.Home, cfg.BaseURL, cfg.APIKeyEnv, cfg.Prompt); err != nil {
		return Invocation{}, err
	}
	binary := cfg.Binary
	if binary == "" {
		binary = "codex"
	}
	mode := "workspace-write"
	if cfg.Confined {
		mode = "danger-full-access"
	}
	argv := []string{binary, "exec", "--sandbox", mode, "--skip-git-repo-check", "-m", cfg.Model}
	vars := baseEnv(cfg.Environ, cfg.Home)
	vars["CODEX_HOME"] = cfg.Home

	if cfg.BaseURL == "" {
		if cfg.ProviderID != "" {
			return Invocation{}, errorf(cli, "provider id %q is set without a base URL; it names the provider at the base URL", cfg.ProviderID)
		}
		if cfg.APIKeyEnv != "" {
			key, err := apiKey(cli, cfg.Environ, cfg.APIKeyEnv)
			if err != nil {
				return Invocation{}, err
			}
			vars["CODEX_API_KEY"] = key
			argv = append(argv, "-c", excludeFromCommands("CODEX_API_KEY"))
		}
		return Invocation{Argv: argv, Env: sortedEnv(vars), Stdin: cfg.Prompt}, nil
	}

	id := cfg.ProviderID
	if id == "" {
		id = DefaultCodexProvider
	}
	if !providerID.MatchString(id) {
		return Invocation{}, errorf(cli, "provider id %q is not 1 to 64 of [a-z0-9_-] (it becomes a TOML key)", id)
	}
	if cfg.APIKeyEnv == "" {
		return Invocation{}, errorf(cli, "a base URL needs the name of the API key variable (the provider's env_key)")
	}
	if _, taken := vars[cfg.APIKeyEnv]; taken {
		return Invocation{}, errorf(cli, "API key variable %s is one the CLI needs for itself; name the key's own variable", cfg.APIKeyEnv)
	}
	key, err := apiKey(cli, cfg.Environ, cfg.APIKeyEnv)
	if err != nil {
		return Invocation{}, err
	}
	vars[cfg.APIKeyEnv] = key
	provider := "{"
	for i, field := range [][2]string{{"name", id}, {"base_url", cfg.BaseURL}, {"env_key", cfg.APIKeyEnv}, {"wire_api", "responses"}} {
		value, err := tomlString(field[1])
		if err != nil {
			return Invocation{}, errorf(cli, "%s %q: %v", field[0], field[1], err)
		}
		if i > 0 {
			provider += ","
		}
		provider += field[0] + "=" + value
	}
	provider += "}"
	argv = append(argv, "-c", "model_provider="+id, "-c", "model_providers."+id+"="+provider,
		"-c", excludeFromCommands(cfg.APIKeyEnv))
	return Invocation{Argv: argv, Env: sortedEnv(vars), Stdin: cfg.Prompt}, nil
}

// excludeFromCommands is the Codex option that removes the variable name (a checked environment
// variable name, so a plain TOML string) from the environment of the commands the agent runs.
func excludeFromCommands(name string) string {
	return `shell_environment_policy.exclude=["` + name + `"]`
}
