package idem_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// lossyConn forwards everything, but once armed, the first write that
// carries COMMIT reaches the server and its answer never reaches the client:
// the client cannot know whether the commit happened. The answer is read and
// thrown away before the client is told the connection is gone, so the
// server has run the COMMIT for certain. (Closing the socket at once would
// race: a Unix socket closed with unread data resets its peer, which could
// then abort the transaction before reading the COMMIT.)
type lossyConn struct {
	net.Conn
	armed *atomic.Bool
	dead  atomic.Bool
	drain sync.Once
}

func (c *lossyConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && bytes.Contains(b, []byte("COMMIT")) && c.armed.CompareAndSwap(true, false) {
		c.dead.Store(true)
	}
	return n, err
}

// errLost is what the client is told once the COMMIT has gone out.
var errLost = errors.New("connection lost after COMMIT was sent")

func (c *lossyConn) Read(b []byte) (int, error) {
	if !c.dead.Load() {
		n, err := c.Conn.Read(b)
		if !c.dead.Load() {
			return n, err
		}
		// pgx reads in the background while it writes, so the COMMIT may
		// have gone out while this read waited, and what it read may
		// already hold the COMMIT's answer: swallow it too.
		got := append([]byte(nil), b[:n]...)
		c.drain.Do(func() { c.swallowCommitAnswer(got) })
		return 0, errLost
	}
	c.drain.Do(func() { c.swallowCommitAnswer(nil) })
	return 0, errLost
}

// swallowCommitAnswer reads, after got, until the server's CommandComplete
// for the COMMIT (tag "COMMIT") has arrived, then closes the connection.
func (c *lossyConn) swallowCommitAnswer(got []byte) {
	defer c.Conn.Close()
	_ = c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte("COMMIT\x00")) {
		n, err := c.Conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return
		}
	}
}

func TestUnknownCommitOutcomeSettledByTheLedger(t *testing.T) {
	var armed atomic.Bool
	var mu sync.Mutex
	db := idemtest.New(t, idemtest.WithSetup(paymentsDDL), idemtest.WithPoolConfig(func(c *pgxpool.Config) {
		// The simple protocol puts the statement text on the wire, so the
		// conn can see the COMMIT go by.
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			var d net.Dialer
			raw, err := d.DialContext(ctx, network, addr)
			if dial != nil {
				raw, err = dial(ctx, network, addr)
			}
			if err != nil {
				return nil, err
			}
			return &lossyConn{Conn: raw, armed: &armed}, nil
		}
	}))
	var executed atomic.Int64
	s, err := idem.NewStore(db.Pool, idem.WithBackoff(time.Millisecond), idem.WithHooks(idem.Hooks{
		Executed: func(context.Context, idem.Event) { executed.Add(1) },
	}))
	require.NoError(t, err)

	armed.Store(true)
	ctx, o := idem.ContextWithOutcome(keyed("unknown"))
	r, err := idem.Atomic(ctx, s, chargeMethod(), fp("100"), charge(100))
	require.NoError(t, err, "the next attempt read the ledger row instead of guessing")
	assert.False(t, armed.Load(), "the commit's answer was lost")
	assert.Equal(t, int64(1), executed.Load(), "the body ran once: the commit had happened")
	assert.True(t, o.Replayed(), "the outcome was settled by reading the stored response")
	assert.Equal(t, int64(100), r.Amount)
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
	assert.Equal(t, 1, n)
}
