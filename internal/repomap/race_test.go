//go:build race

package repomap

// raceOn: the race detector slows the differential tests tenfold; they
// try fewer random trees under it.
const raceOn = true
