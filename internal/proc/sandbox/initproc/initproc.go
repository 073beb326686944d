// Package initproc is the sandbox's init: the code that runs in a confined command's process, between
// the factory binary's re-execution inside new namespaces and the execution of the command.
//
// It does its work in its package initializer, which Go runs before the initializers of every package
// that does not come before it in the initialization order (packages are initialized in the order of
// their import paths, each once all that it imports are). Its imports are few and light, so a confined
// command does not pay for the initializers of the rest of the binary (JSON Schema compilers, model
// clients...), which cost several milliseconds per command. Package sandbox imports it; a binary that
// links sandbox can therefore always serve as the init, and sandbox.Init only records that it may.
//
// The process is single-purpose: it confines itself and executes the command in its place, on the one
// thread that runs the package initializers (the main thread, locked to its goroutine until main
// starts), so the per-thread Landlock domain, no-new-privileges bit and capabilities it sets are the
// ones the command inherits; the runtime's other threads end with the execve.
package initproc

// Arg0 is the argv[0] under which the factory binary runs as the sandbox's init. Its argv[1] is the
// plan as JSON, argv[2] the command's path and the rest the command's argv.
const Arg0 = "factory-sandbox-init"

// Failed is the init's exit code when it cannot confine or execute the command, as for `env`.
const Failed = 125

// Plan is what the init does, passed as JSON in its argv[1].
type Plan struct {
	Namespaces bool     `json:"namespaces"`
	Probe      bool     `json:"probe,omitempty"` // set everything up, then exit 0 instead of executing
	Tmp        string   `json:"tmp"`             // the private temporary directory, bound at /tmp inside namespaces; "" there: a fresh tmpfs
	Empty      string   `json:"empty"`           // an empty unreadable file, bound over hidden files; "" with a fresh tmpfs: made in it
	MakeHome   string   `json:"make_home"`       // with a fresh tmpfs, a directory in it to create for HOME
	Writable   []string `json:"writable"`        // work tree and HOME
	ReadOnly   []string `json:"read_only"`
	Hide       []string `json:"hide"`
	ABI        int      `json:"abi"`
	Parent     int      `json:"parent"`                  // factory's pid: the init dies with it
	PIDs       bool     `json:"pids,omitempty"`          // a new PID namespace and a fresh /proc
	HostNet    bool     `json:"host_net,omitempty"`      // keep the host's network namespace
	Ports      []uint16 `json:"connect_ports,omitempty"` // with HostNet: the TCP ports it may connect to
	InitFD     int      `json:"init_fd,omitempty"`       // a descriptor of the init's own program, not for the command
}
