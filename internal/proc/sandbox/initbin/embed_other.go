//go:build !linux || !(amd64 || arm64)

package initbin

// Binary is nil: no init is built for this platform, so the sandbox cannot confine here.
var Binary []byte
