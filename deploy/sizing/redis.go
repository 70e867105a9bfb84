package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a throwaway redis-server on a loopback port with no
// persistence, its files in a temporary directory.
type redisServer struct {
	Addr   string
	Client *redis.Client
	cmd    *exec.Cmd
}

// startRedis starts binary (redis-server) on a free loopback port with data
// and log under dir, and waits up to 5 s for it to answer PING. Stop it
// with Stop.
func startRedis(ctx context.Context, binary, dir string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	r := &redisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	r.Client = redis.NewClient(&redis.Options{Addr: r.Addr})
	for deadline := time.Now().Add(5 * time.Second); ; {
		if r.Client.Ping(ctx).Err() == nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within 5 s", r.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it.
func (r *redisServer) Stop() {
	r.Client.Close()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// reset empties the server, frees what the allocator can give back and
// zeroes INFO commandstats, so the next deltas are of one experiment.
func (r *redisServer) reset(ctx context.Context) error {
	for _, args := range [][]any{{"FLUSHALL", "SYNC"}, {"MEMORY", "PURGE"}, {"CONFIG", "RESETSTAT"}} {
		if err := r.Client.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("%v: %w", args, err)
		}
	}
	return nil
}

// snapshot is what one INFO call says about memory, CPU and commands.
type snapshot struct {
	// UsedMemory is used_memory, bytes.
	UsedMemory int64
	// CPU is used_cpu_user + used_cpu_sys of the main thread, seconds.
	CPU float64
	// Reads is total_reads_processed: socket read events, each carrying
	// one or more commands (a pipeline of many arrives in few): the round
	// trips clients made.
	Reads int64
	// Calls are the calls of each command (lower case, e.g. "evalsha").
	Calls map[string]int64
}

// info reads memory, CPU and commandstats in one INFO call.
func (r *redisServer) info(ctx context.Context) (snapshot, error) {
	text, err := r.Client.Info(ctx, "memory", "cpu", "commandstats", "stats").Result()
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{Calls: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		key, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case key == "used_memory":
			s.UsedMemory, _ = strconv.ParseInt(value, 10, 64)
		case key == "used_cpu_user" || key == "used_cpu_sys":
			f, _ := strconv.ParseFloat(value, 64)
			s.CPU += f
		case key == "total_reads_processed":
			s.Reads, _ = strconv.ParseInt(value, 10, 64)
		case strings.HasPrefix(key, "cmdstat_"):
			s.Calls[strings.TrimPrefix(key, "cmdstat_")] = callsOf(value)
		}
	}
	return s, sc.Err()
}

// callsOf reads calls=N from a commandstats value
// ("calls=12,usec=40,usec_per_call=3.33,...").
func callsOf(v string) int64 {
	for _, f := range strings.Split(v, ",") {
		if n, ok := strings.CutPrefix(f, "calls="); ok {
			c, _ := strconv.ParseInt(n, 10, 64)
			return c
		}
	}
	return 0
}

// delta is what happened between two snapshots: commands per command name
// (INFO itself excluded), memory and CPU.
type delta struct {
	Calls  map[string]int64
	Memory int64
	CPU    float64
	Reads  int64
}

func diff(before, after snapshot) delta {
	d := delta{Calls: map[string]int64{}, Memory: after.UsedMemory - before.UsedMemory, CPU: after.CPU - before.CPU,
		Reads: after.Reads - before.Reads - 1} // the INFO itself
	for name, n := range after.Calls {
		if name == "info" || name == "config|resetstat" || name == "config" {
			continue
		}
		if n -= before.Calls[name]; n > 0 {
			d.Calls[name] = n
		}
	}
	return d
}

// total is the number of commands in d.
func (d delta) total() int64 {
	var n int64
	for _, c := range d.Calls {
		n += c
	}
	return n
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before it is used; the callers fail loudly then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// rssBytes returns the resident set size of process pid (VmRSS in
// /proc/PID/status), bytes; 0 where /proc is not there.
func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuSeconds returns user + system CPU time of process pid from
// /proc/PID/stat, seconds (clock ticks of 1/100 s, Linux's USER_HZ); 0
// where /proc is not there.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
