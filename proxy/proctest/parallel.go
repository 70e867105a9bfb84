package proctest

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitingParallel, called in a TestMain before m.Run, lets 4 × GOMAXPROCS
// parallel tests run at once instead of go test's default GOMAXPROCS,
// unless -test.parallel was given: for packages whose parallel tests spend
// their time waiting on a proxy, a process or a socket, not on the CPU (on
// 2 cores, cmd/callout-proxy's end-to-end tests took 22 s queued two at a
// time, 11 s eight at a time). It parses the test flags (testing.M.Run
// would).
func WaitingParallel() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
}
