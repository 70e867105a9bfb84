package main

import (
	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr, drawn only when stderr is a
// terminal; a nil *progress draws nothing, so callers need not check.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress returns a bar of max steps described by desc, or nil when
// stderr is not a terminal (scripts and logs get no control characters).
func (a *app) newProgress(max int, desc string) *progress {
	if !a.isTerminal(a.stderr) {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(max,
		progressbar.OptionSetWriter(a.stderr), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(a.throttle), progressbar.OptionSetWidth(30),
		progressbar.OptionOnCompletion(func() { a.notef("\n") }))}
}

// set moves the bar to n.
func (p *progress) set(n int) {
	if p != nil {
		_ = p.bar.Set(n)
	}
}

// finish stops the bar where it is, ending its line.
func (p *progress) finish() {
	if p != nil && !p.bar.IsFinished() {
		_ = p.bar.Exit() // its completion hook ends the line
	}
}
