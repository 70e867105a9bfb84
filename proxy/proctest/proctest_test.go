package proctest

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// TestLogBufferAudits: only JSON lines with msg "audit" are audits; HasAudit
// matches every key of want.
func TestLogBufferAudits(t *testing.T) {
	var b LogBuffer
	_, _ = b.Write([]byte(`{"msg":"audit","action":"replay","token":"ops"}` + "\n"))
	_, _ = b.Write([]byte("not json\n" + `{"msg":"started"}` + "\n"))
	_, _ = b.Write([]byte(`{"msg":"audit","action":"pause","token":"viewer"}` + "\n"))
	if got := len(b.Audits()); got != 2 {
		t.Fatalf("%d audits, want 2: %q", got, b.String())
	}
	if !b.HasAudit(map[string]string{"action": "pause", "token": "viewer"}) {
		t.Error("the pause audit by viewer is not found")
	}
	if b.HasAudit(map[string]string{"action": "pause", "token": "ops"}) {
		t.Error("an audit no line has was found")
	}
	b.WaitFor(t, `"msg":"started"`, time.Second)
	if got := len(b.Records("started")); got != 1 {
		t.Errorf("%d started records, want 1", got)
	}
}

// TestFreePort: the port returned can be listened on.
func TestFreePort(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d: %v", p, err)
	}
	_ = l.Close()
}
