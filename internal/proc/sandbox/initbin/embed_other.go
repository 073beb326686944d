//go:build !linux || !(amd64 || arm64)

package initbin

// Binary is nil: no init is embedded for this platform (the sandbox re-executes factory itself).
var Binary []byte
