package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one script run queued in a pipeline by EVALSHA.
type scriptCall struct {
	sc   *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
}

// queue adds the call to p.
func (c *scriptCall) queue(ctx context.Context, p redis.Pipeliner) {
	c.cmd = c.sc.EvalSha(ctx, p, c.keys, c.args...)
}

// result is the call's reply after the pipeline ran. A script Redis did
// not know (NOSCRIPT: a flushed or restarted Redis; the script did not
// run) is run again with EVAL, as go-redis Script.Run does.
func (s *Store) result(ctx context.Context, op string, c *scriptCall) (any, error) {
	v, err := c.cmd.Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = c.sc.Eval(ctx, s.rdb, c.keys, c.args...).Result()
	}
	if err != nil && !isNil(err) {
		return nil, s.wrap(op, err)
	}
	return v, nil
}
