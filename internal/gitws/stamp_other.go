//go:build !linux

package gitws

import "os"

// statLine reports no stamp off Linux: Rollback always asks git there.
func statLine(os.FileInfo) (string, bool) { return "", false }

// changeStamp is unknown off Linux: Rollback judges by size, mode and mtime.
func changeStamp(os.FileInfo) string { return "" }
