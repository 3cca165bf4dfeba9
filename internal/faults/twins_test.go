package faults

import (
	"fmt"
	"testing"
)

// TestTwins256 releases 256 identical calls per key at once, atomic and
// external.
func TestTwins256(t *testing.T) {
	e := newEnv(t, "256-way twins", envConfig{poolSize: 64})
	ins := intents("twins", size(1, 4), size(1, 4))
	e.storm(ins, 256)()
	e.check(ins)
}

// TestThousandKeysEightTwins releases 8 identical calls for each of 1,000
// keys at once (100 in the short mode), half atomic, half external, on a
// 64-connection pool.
func TestThousandKeysEightTwins(t *testing.T) {
	n := size(50, 500)
	e := newEnv(t, fmt.Sprintf("%d keys x 8 twins", 2*n), envConfig{poolSize: 64})
	ins := intents("thousand", n, n)
	e.storm(ins, 8)()
	e.check(ins)
}
