//go:build !race

package multiproc

// raceEnabled: this test binary runs without the race detector.
const raceEnabled = false
