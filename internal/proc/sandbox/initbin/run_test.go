package initbin_test

import (
	"bytes"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestInitRuns runs each embedded build, the foreign one under qemu's user-mode emulation, on what
// needs no privilege: its start, the reading of its options, its refusals and the execution of the
// command with the environment it was given. Package sandbox's tests confine for real with the
// build of the machine's own architecture.
func TestInitRuns(t *testing.T) {
	var many []string
	for range 5000 {
		many = append(many, "-w", "/", "-r", "/", "-x", "/nonexistent", "-c", "1")
	}
	cases := []struct {
		name       string
		args       []string
		code       int
		out, fault string
	}{
		{"runs the command", []string{"-a", "0", "--", "/bin/sh", "sh", "-c", `echo "$0 $1 $FOO"`, "a b", "c"}, 0, "a b c FOO-value\n", ""},
		{"probe stops before the command", []string{"-q", "-a", "0", "--", "/bin/false", "false"}, 0, "", ""},
		{"unknown option", []string{"-z", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: unknown option -z\n"},
		{"option without its value", []string{"-w"}, 125, "", "factory sandbox: bad plan: no value for -w\n"},
		{"relative path", []string{"-w", "tree", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: not an absolute path: tree\n"},
		{"bad number", []string{"-a", "7x", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: not a number for -a\n"},
		{"bad port", []string{"-c", "65536", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: bad port 65536\n"},
		{"many paths", append(many, "-q", "-a", "0", "--", "/bin/true", "true"), 0, "", ""},
		{"cache without namespaces", []string{"-o", "/", "-a", "0", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: -o needs namespaces\n"},
		{"gateway without a network namespace", []string{"-g", "3", "-p", "7390", "-a", "0", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: -g needs a network namespace of the init's\n"},
		{"gateway with the host's network", []string{"-n", "-H", "-T", "/tmp", "-g", "3", "-p", "7390", "-a", "0", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: -g needs a network namespace of the init's\n"},
		{"gateway without its port", []string{"-n", "-T", "/tmp", "-g", "3", "-a", "0", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: -g and -p go together\n"},
		{"gateway on a standard stream", []string{"-g", "2", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: bad descriptor for -g: 2\n"},
		{"bad gateway port", []string{"-p", "0", "--", "/bin/true", "true"}, 125, "", "factory sandbox: bad plan: bad port 0\n"},
		{"no command", []string{"-a", "0", "--", "/bin/true"}, 125, "", "factory sandbox: no command to run\n"},
		{"no end of options", []string{"-a", "0"}, 125, "", "factory sandbox: bad plan: no --\n"},
		{"missing program", []string{"-a", "0", "--", "/nonexistent/prog", "prog"}, 125, "", "factory sandbox: cannot execute /nonexistent/prog: no such file or directory\n"},
		{"another parent", []string{"-a", "0", "-u", "1", "--", "/bin/true", "true"}, 125, "", "factory sandbox: factory exited before the command started\n"},
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			var prefix []string
			if arch != runtime.GOARCH {
				emu := map[string]string{"amd64": "qemu-x86_64", "arm64": "qemu-aarch64"}[arch]
				if _, err := exec.LookPath(emu); err != nil {
					t.Skipf("%s is not installed (Debian: qemu-user): cannot run the %s build here", emu, arch)
				}
				prefix = []string{emu}
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					argv := append(append(prefix, "./init-linux-"+arch), tc.args...)
					cmd := exec.Command(argv[0], argv[1:]...)
					cmd.Env = []string{"FOO=FOO-value"}
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					err := cmd.Run()
					code := 0
					if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
						code = exit.ExitCode()
					} else if err != nil {
						t.Fatal(err)
					}
					if code != tc.code || stdout.String() != tc.out || stderr.String() != tc.fault {
						t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q",
							strings.Join(argv, " "), code, stdout.String(), stderr.String(), tc.code, tc.out, tc.fault)
					}
				})
			}
		})
	}
}
