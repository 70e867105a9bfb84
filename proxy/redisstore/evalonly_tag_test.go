//go:build scripts_eval

package redisstore

// scriptsEval: see evalonly_test.go.
const scriptsEval = true
