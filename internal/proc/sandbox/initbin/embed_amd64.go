//go:build linux && amd64

package initbin

import _ "embed"

// Binary is the init for this machine's architecture; nil where none is embedded.
//
//go:embed init-linux-amd64
var Binary []byte
