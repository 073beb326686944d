// Package initbin holds the sandbox's init, a small static program written in C without a C
// library (c/init.c), built for linux on amd64 and arm64 and embedded in the factory binary.
// Package sandbox writes Binary into a sealed memfd once per process and executes that for every
// confined command; it confines itself and runs the command, under PID 1 of a new PID namespace when
// it makes the namespaces itself.
//
// Why a program of its own, and not Go: see c/init.c. In short, a confined command costs about
// 1.5 ms of CPU more than the same command unconfined with this init, against 5 ms with the Go init
// it replaced (bench/README.md, "Seventh round").
//
// The binaries are generated, and a test rebuilds them from source and compares: after any
// change to c/init.c, run
//
//	go generate ./internal/proc/sandbox/initbin
//
// (it needs gcc and Debian's gcc-aarch64-linux-gnu) and commit the result. cc.version records the
// compilers that made them.
package initbin

//go:generate sh gen.sh
