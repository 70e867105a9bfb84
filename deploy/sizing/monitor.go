package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
)

// monitor counts the commands clients send to a Redis server, by name,
// through MONITOR: commands run inside a Lua script (MONITOR marks their
// source "lua") are not counted, so the counts are what the proxy sent, not
// what its scripts did. MONITOR slows the server: measure CPU without it.
type monitor struct {
	conn net.Conn
	done chan struct{}
	mu   sync.Mutex
	sent map[string]int64
}

// startMonitor opens a connection to addr and issues MONITOR.
func startMonitor(ctx context.Context, addr string) (*monitor, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+OK" {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", line, err)
	}
	m := &monitor{conn: conn, done: make(chan struct{}), sent: map[string]int64{}}
	go m.read(rd)
	return m, nil
}

// read counts lines like
// +1700000000.123456 [0 127.0.0.1:50000] "evalsha" "ab12..." "3" ...
func (m *monitor) read(rd *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
		if open < 0 || end < open || strings.Contains(line[open:end], "lua") {
			continue
		}
		fields := strings.SplitN(strings.TrimSpace(line[end+1:]), " ", 2)
		name := strings.ToLower(strings.Trim(fields[0], `"`))
		m.mu.Lock()
		m.sent[name]++
		m.mu.Unlock()
	}
}

// counts returns the commands counted so far.
func (m *monitor) counts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.sent))
	for k, v := range m.sent {
		out[k] = v
	}
	return out
}

// Stop closes the connection and waits for the reader.
func (m *monitor) Stop() {
	m.conn.Close()
	<-m.done
}
