// Package version says what factory binary this is, from the build
// information Go embeds: module version, VCS revision, Go version, platform.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Devel is the version of a binary built from a work tree rather than
// installed at a module version (go build, go install ./cmd/factory).
const Devel = "devel"

// Info is what `factory version --json` prints.
type Info struct {
	Version  string `json:"version"`            // module version (v1.2.3) or "devel"
	Revision string `json:"revision,omitempty"` // VCS commit, when the build recorded it
	Time     string `json:"time,omitempty"`     // commit time (RFC 3339), when recorded
	Modified bool   `json:"modified"`           // the work tree had uncommitted changes
	Go       string `json:"go"`                 // the toolchain that built the binary
	Platform string `json:"platform"`           // GOOS/GOARCH
}

// Read returns the running binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
}

// FromBuildInfo extracts Info from bi; nil (no build info) gives a devel
// version with the running toolchain and platform.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Devel, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		info.Platform = goos + "/" + goarch
	}
	return info
}

// String is the one line of `factory --version`:
// "factory v1.2.3 (commit 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.8 linux/amd64".
func (i Info) String() string {
	var vcs []string
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		vcs = append(vcs, "commit "+rev)
	}
	if i.Time != "" {
		vcs = append(vcs, i.Time)
	}
	if i.Modified {
		vcs = append(vcs, "modified")
	}
	s := "factory " + i.Version
	if len(vcs) > 0 {
		s += " (" + strings.Join(vcs, ", ") + ")"
	}
	return fmt.Sprintf("%s %s %s", s, i.Go, i.Platform)
}
