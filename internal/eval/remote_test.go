package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemoteNames(t *testing.T) {
	for _, tc := range []struct {
		k                  RunKey
		name, workflow, rp string
	}{
		{RunKey{"roman", "m1", 1}, "0123abcd/roman/m1/1", "factory-eval-0123abcd/roman/m1/1", "/r/0123abcd/roman/m1/1.git"},
		{RunKey{"a-b", "openai:gpt-4.1", 12}, "0123abcd/a-b/openai_gpt-4.1/12", "factory-eval-0123abcd/a-b/openai_gpt-4.1/12", "/r/0123abcd/a-b/openai_gpt-4.1/12.git"},
		// A dash in a case name cannot make two runs' names meet.
		{RunKey{"a", "b-c", 1}, "0123abcd/a/b-c/1", "factory-eval-0123abcd/a/b-c/1", "/r/0123abcd/a/b-c/1.git"},
		{RunKey{"a-b", "c", 1}, "0123abcd/a-b/c/1", "factory-eval-0123abcd/a-b/c/1", "/r/0123abcd/a-b/c/1.git"},
	} {
		if got := RemoteName("0123abcd", tc.k); got != tc.name {
			t.Errorf("RemoteName(%v) = %s, want %s", tc.k, got, tc.name)
		}
		if got := WorkflowID("0123abcd", tc.k); got != tc.workflow {
			t.Errorf("WorkflowID(%v) = %s, want %s", tc.k, got, tc.workflow)
		}
		if got := RemoteRepo("/r", "0123abcd", tc.k); got != tc.rp {
			t.Errorf("RemoteRepo(%v) = %s, want %s", tc.k, got, tc.rp)
		}
	}
}

func TestRemoteRoot(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tc := range []struct{ in, want, err string }{
		{in: "/srv/evals", want: "/srv/evals"},
		{in: "/srv/evals/", want: "/srv/evals"},
		{in: "file:///srv/evals", want: "/srv/evals"},
		{in: "file://localhost/srv/evals", want: "/srv/evals"},
		{in: "remotes", want: filepath.Join(wd, "remotes")},
		{in: "", err: "empty"},
		{in: "ssh://git.example/evals", err: "a ssh:// remote cannot be used"},
		{in: "https://git.example/evals", err: "a https:// remote cannot be used"},
		{in: "file://otherhost/srv", err: "give file:///PATH"},
		{in: "file:///srv?x=1", err: "give file:///PATH"},
		{in: "-x", err: "cannot start with '-'"},
	} {
		got, err := RemoteRoot(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("RemoteRoot(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("RemoteRoot(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got := RemoteURL("/srv/evals/x/1.git"); got != "file:///srv/evals/x/1.git" {
		t.Errorf("RemoteURL = %s", got)
	}
}
