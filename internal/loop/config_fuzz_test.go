package loop

import (
	"bytes"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// problemLine is the shape of every ParseConfig problem: a key path whose
// parts are bare or quoted TOML keys (or a line number, or the TOML
// decoder's own "toml: …" text), a colon, a message.
var problemLine = regexp.MustCompile(`^(line \d+|toml|` + keyPart + `(\.` + keyPart + `)*): \S`)

const keyPart = `([A-Za-z0-9_\-]+|"([^"\\]|\\.)*")`

// FuzzConfig feeds ParseConfig (.runner/config.toml, hand-edited) arbitrary
// files. Problems are "key: message", sorted and deterministic; a config
// with none has every value in range and survives a round trip through
// the TOML encoder unchanged.
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		configTemplate,
		"",
		"[guard]\ncommand = [\"python3\", \"-m\", \"pytest\", \"-q\"]\n\n[executor]\nkind = \"command\"\ncommand = [\"./my-agent.sh\"]\n",
		"[executor]\nkind = \"codex\"\nmodel = \"gpt-5-codex\"\nbase_url = \"https://gateway.example.com/v1\"\napi_key_env = \"OPENAI_API_KEY\"\n",
		"[executor]\nkind = \"claude\"\nmodel = \"claude-sonnet-4-5\"\n[guard]\nsandbox = \"required\"\npass_env = [\"HOME\"]\n",
		"[executor]\nkind = \"command\"\ncommand = [\".runner/agent.sh\"]\npass_env = [\"MY_AGENT_API_KEY\", \"MY_AGENT_MODEL\"]\n",
		"max_iterations = \"ten\"\n",
		"max_attempts_default = 0\nmax_iterations = 100001\niteration_timeout_secs = -1\n[executor]\nkind = \"x\"\n[nope]\na = 1\n",
		"executor_output_limit_bytes = 9223372036854775807\n[guard]\ncommand = [\"\"]\nsandbox = \"maybe\"\n",
		"[executor]\nkind = \"codex\"\ncommand = [\"a\"]\nmodel = \"m\"\nbase_url = \"ftp://x\"\napi_key_env = \"A=B\"\n",
		"max_iterations = 1\nmax_iterations = 2\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ps := ParseConfig(data)
		c2, ps2 := ParseConfig(data)
		if !reflect.DeepEqual(c, c2) || !slices.Equal(ps, ps2) {
			t.Fatalf("not deterministic: %q / %q", ps, ps2)
		}
		if !slices.IsSorted(ps) {
			t.Fatalf("problems not sorted: %q", ps)
		}
		for _, p := range ps {
			if !problemLine.MatchString(p) {
				t.Fatalf("problem %q does not name a key or line", p)
			}
		}
		if len(ps) > 0 {
			return
		}
		if len(c.problems()) != 0 {
			t.Fatalf("accepted config has problems %q", c.problems())
		}
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(c); err != nil {
			t.Fatalf("accepted config does not encode: %v", err)
		}
		back, ps := ParseConfig(buf.Bytes())
		if len(ps) > 0 {
			t.Fatalf("accepted config, encoded, has problems %q:\n%s", ps, buf.String())
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", c, back, buf.String())
		}
		// What becomes an argv or an environment name must be one exec
		// can take: a NUL byte would fail only when the loop runs.
		for _, list := range [][]string{c.Guard.Command, c.Guard.PassEnv, c.Executor.Command, c.Executor.PassEnv} {
			for _, s := range list {
				if strings.ContainsRune(s, 0) {
					t.Fatalf("accepted config holds a NUL byte in %q", list)
				}
			}
		}
	})
}
