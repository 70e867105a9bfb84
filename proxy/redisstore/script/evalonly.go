//go:build !scripts_eval

package script

// evalOnly, true only in a test build with the tag scripts_eval
// (evalonly_tag.go), makes Attach act as AttachEval, so a whole test run
// takes the EVALSHA/EVAL path on real Redis. The binary is built without
// the tag: no environment variable nor setting changes its mode.
const evalOnly = false
