package faults

import "testing"

// TestBlackholePartition drops every byte in both directions (toxiproxy
// timeout toxics with no timeout: connections stay open, nothing arrives)
// during a load, and heals the partition only after every call in flight has
// returned: a call that waits on the network past its deadline hangs the test.
func TestBlackholePartition(t *testing.T) {
	n := size(30, 700)
	e := newEnv(t, "blackhole partition", envConfig{})
	ins := withInline(intents("blackhole", n, n), "blackhole", n)
	wait := e.storm(ins, 4)
	e.waitClaims(int64(len(ins) / 3))
	e.addToxic("blackhole-up", "timeout", "upstream", `{"timeout":0}`)
	e.addToxic("blackhole-down", "timeout", "downstream", `{"timeout":0}`)
	e.drainInflight()
	e.removeToxic("blackhole-up")
	e.removeToxic("blackhole-down")
	wait()
	e.check(ins)
}
