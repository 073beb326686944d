//go:build linux && arm64

package initbin

import _ "embed"

// Binary is the init for this machine's architecture; nil where none is embedded.
//
//go:embed init-linux-arm64
var Binary []byte
