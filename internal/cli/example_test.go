package cli

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/llmtest"
)

var updateExample = flag.Bool("update-example", false, "re-record example/transcript.jsonl with the hand-written reply")

// exampleReply is the hand-written proposal in example/transcript.jsonl.
func exampleReply(t *testing.T) llmtest.Reply {
	calc, err := os.ReadFile("../../example/repo/calc.py")
	if err != nil {
		t.Fatal(err)
	}
	newCalc := string(calc) + `

def multiply(a, b):
    """Return the product of a and b."""
    return a * b
`
	test := `import unittest

from calc import multiply


class MultiplyTest(unittest.TestCase):
    def test_multiply(self):
        self.assertEqual(multiply(3, 4), 12)
        self.assertEqual(multiply(-2, 5), -10)


if __name__ == "__main__":
    unittest.main()
`
	return llmtest.Reply{Content: llmtest.Proposal("Add multiply(a, b) to calc.py and a unit test for it.",
		llmtest.Write{Path: "calc.py", BaseSHA256: sha(string(calc)), Content: newCalc},
		llmtest.Write{Path: "tests/test_multiply.py", BaseSHA256: sha(""), Content: test},
	)}
}

// TestExampleReplays runs the README's offline example exactly as a user
// would, so a prompt change that invalidates the transcript fails here.
func TestExampleReplays(t *testing.T) {
	env := append(os.Environ(), "FACTORY=factory", "TMPDIR="+t.TempDir())
	if *updateExample {
		srv := llmtest.Start(t, exampleReply(t))
		env = append(env, "EXAMPLE_RECORD_BASE_URL="+srv.URL, "OPENAI_API_KEY=example")
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "example", "run.sh"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example/run.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"verdict: PASS", " M calc.py", "?? tests/test_multiply.py"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
