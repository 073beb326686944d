package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
		line string
	}{
		{"no build info", nil,
			Info{Version: Devel, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH},
			"factory devel " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{"work tree build with VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-27T20:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: Devel, Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-11-27T20:00:00Z", Modified: true, Go: "go1.26.8", Platform: "linux/arm64"},
			"factory devel (commit 0123456789ab, 2026-11-27T20:00:00Z, modified) go1.26.8 linux/arm64"},
		{"go install at a version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "darwin"}, {Key: "GOARCH", Value: "amd64"}}},
			Info{Version: "v1.4.0", Go: "go1.26.8", Platform: "darwin/amd64"},
			"factory v1.4.0 go1.26.8 darwin/amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FromBuildInfo(tc.bi)
			if got != tc.want {
				t.Errorf("FromBuildInfo = %+v, want %+v", got, tc.want)
			}
			if got.String() != tc.line {
				t.Errorf("String = %q, want %q", got.String(), tc.line)
			}
		})
	}
}
