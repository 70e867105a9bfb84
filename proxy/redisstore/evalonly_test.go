//go:build !scripts_eval

package redisstore

// scriptsEval: this test build runs every client's scripts as Redis
// Functions where Redis has them (the tag scripts_eval: by EVAL only).
const scriptsEval = false
