// Package initbin holds the sandbox's init as a small, static program (initmain, built for linux
// on amd64 and arm64), embedded in the factory binary.
//
// Why: the init used to be the factory binary itself, re-executed. Starting a Go program of over
// 100 MB costs about 9 ms of CPU before its first line of init runs (the runtime's itab table, the
// initializers of the protobuf and gRPC packages Temporal brings), against about 2 ms for this
// one, and it is paid by every confined command. Package sandbox writes Binary into a sealed
// memfd once per process and executes that.
//
// The files are generated, and a test rebuilds them from source and compares: after any change to
// package initproc or initmain, run
//
//	go generate ./internal/proc/sandbox/initbin
//
// and commit the result. Builds are reproducible for one Go version (-trimpath, no VCS stamp, no
// cgo); go.version records the one that made them.
package initbin

//go:generate sh gen.sh
