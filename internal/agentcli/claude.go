package agentcli

// ClaudeConfig says how to run Claude Code for one session.
type ClaudeConfig struct {
	// Binary is the claude program: a path, or "" for "claude" looked up on PATH.
	Binary string
	Model  string // required, as --model
	// BaseURL is a Messages-API endpoint without the /v1, such as "http://127.0.0.1:8080", passed as
	// ANTHROPIC_BASE_URL. "" means Anthropic's API.
	BaseURL string
	// APIKeyEnv names the variable of Environ that holds the API key, passed as ANTHROPIC_API_KEY.
	// Required: with a private HOME there is no stored login to fall back on.
	APIKeyEnv string
	// Home is a private, existing, absolute directory for HOME: Claude Code keeps ~/.claude.json and
	// ~/.claude/ there, and neither it nor the commands it runs read the user's settings or dotfiles.
	// The caller creates it (outside the repository) and removes it.
	Home    string
	Prompt  []byte   // the prompt, given on stdin
	Environ []string // the caller's environment (os.Environ()) from which the allow-list is taken
	// AsRoot says the CLI runs as root (os.Geteuid() == 0), where Claude Code refuses
	// --dangerously-skip-permissions unless IS_SANDBOX=1 says the machine is disposable.
	AsRoot bool
}

// Claude returns the invocation of Claude Code in print mode for cfg:
//
//	claude -p --dangerously-skip-permissions --model <model>
//
// with the prompt on stdin. Skipping permissions lets it edit files and run commands without asking;
// unlike Codex it has no sandbox, so it can commit (the runner must undo that).
//
// Env is proc's core allow-list (PATH, LANG, LC_*, TERM, TZ, USER, LOGNAME, SHELL, TMPDIR and the
// Go/Python/Rust toolchain variables) plus HOME=Home, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL when set,
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (no telemetry, error reports or update checks) and
// IS_SANDBOX=1 with AsRoot. Nothing else of Environ is passed.
func Claude(cfg ClaudeConfig) (Invocation, error) {
	const cli = "claude"
	if err := checkCommon(cli, cfg.Model, cfg.Home, cfg.BaseURL, cfg.APIKeyEnv, cfg.Prompt); err != nil {
		return Invocation{}, err
	}
	if cfg.APIKeyEnv == "" {
		return Invocation{}, errorf(cli, "the name of the API key variable is empty; with a private home there is no stored login")
	}
	key, err := apiKey(cli, cfg.Environ, cfg.APIKeyEnv)
	if err != nil {
		return Invocation{}, err
	}
	binary := cfg.Binary
	if binary == "" {
		binary = "claude"
	}
	vars := baseEnv(cfg.Environ, cfg.Home)
	vars["ANTHROPIC_API_KEY"] = key
	vars["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	if cfg.BaseURL != "" {
		vars["ANTHROPIC_BASE_URL"] = cfg.BaseURL
	}
	if cfg.AsRoot {
		vars["IS_SANDBOX"] = "1"
	}
	return Invocation{
		Argv:  []string{binary, "-p", "--dangerously-skip-permissions", "--model", cfg.Model},
		Env:   sortedEnv(vars),
		Stdin: cfg.Prompt,
	}, nil
}
