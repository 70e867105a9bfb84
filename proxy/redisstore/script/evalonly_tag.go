//go:build scripts_eval

package script

// evalOnly: see evalonly.go. This build (go test -tags scripts_eval) runs
// every client's scripts by EVALSHA/EVAL.
const evalOnly = true
