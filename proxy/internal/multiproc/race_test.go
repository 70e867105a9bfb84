//go:build race

package multiproc

// raceEnabled: this test binary runs with the race detector, so the
// replicas are built with it too.
const raceEnabled = true
