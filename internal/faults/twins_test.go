package faults

import (
	"fmt"
	"testing"
)

// TestTwins256 releases 256 identical calls per key at once, atomic,
// external and inline, on the pgx and the database/sql path.
func TestTwins256(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) {
		e := newEnv(t, "256-way twins"+p.label(), envConfig{poolSize: 64, path: p})
		ins := withInline(intents("twins", size(1, 14), size(1, 14)), "twins", size(1, 14))
		e.storm(ins, 256)()
		e.check(ins)
	})
}

// TestThousandKeysEightTwins releases 8 identical calls for each of 1,500
// keys at once (150 in the short mode), a third each atomic, external and
// inline, on a 64-connection pool, on the pgx and the database/sql path.
func TestThousandKeysEightTwins(t *testing.T) {
	onBothPaths(t, func(t *testing.T, p txPath) {
		n := size(50, 500)
		e := newEnv(t, fmt.Sprintf("%d keys x 8 twins%s", 3*n, p.label()), envConfig{poolSize: 64, path: p})
		ins := withInline(intents("thousand", n, n), "thousand", n)
		e.storm(ins, 8)()
		e.check(ins)
	})
}
