//go:build !race

package repomap

const raceOn = false
