package tomlkeys

import (
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

type check struct {
	Name    string   `toml:"name"`
	Command []string `toml:"command"`
}

type doc struct {
	Spec   string  `toml:"spec"`
	Hidden string  `toml:"-"`
	Checks []check `toml:"checks"`
	Guard  struct {
		Sandbox string `toml:"sandbox"`
	} `toml:"guard"`
}

func TestUnknown(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"all spelled as tagged", "spec = \"a\"\n[guard]\nsandbox = \"off\"\n[[checks]]\nname = \"n\"\ncommand = [\"true\"]\n", nil},
		{"inline table", "guard = {sandbox = \"off\"}\n", nil},
		{"unknown key", "spek = \"a\"\n", []string{"spek"}},
		{"a key in another case", "Spec = \"a\"\n", []string{"Spec"}},
		{"two spellings", "spec = \"a\"\nSPEC = \"b\"\n", []string{"SPEC"}},
		{"nested in a table", "[guard]\nSandbox = \"off\"\n", []string{"guard.Sandbox"}},
		{"table in another case", "[Guard]\nsandbox = \"off\"\n", []string{"Guard", "Guard.sandbox"}},
		{"in an array of tables, reported once", "[[checks]]\nCommand = [\"a\"]\n[[checks]]\nCommand = [\"b\"]\n", []string{"checks.Command"}},
		{"a field tagged -", "Hidden = \"x\"\n", []string{"Hidden"}},
		{"unknown table", "[nope]\na = 1\n", []string{"nope", "nope.a"}},
		{"a quoted key holding the path separator", "\"guard\\u0000sandbox\" = \"off\"\n", []string{`"guard\u0000sandbox"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			md, err := toml.Decode(tc.in, &d)
			if err != nil {
				t.Fatal(err)
			}
			if got := Unknown(md, &d); !slices.Equal(got, tc.want) {
				t.Errorf("Unknown = %q, want %q", got, tc.want)
			}
		})
	}
}
