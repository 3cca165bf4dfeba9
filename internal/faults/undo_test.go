package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// hangGuard is how long a test waits for a call that must return while the
// network drops every byte. It only turns a hang into a failure; the test
// asserts that the call returned, never how fast.
const hangGuard = time.Minute

var errBody = errors.New("the body failed")

// TestSavepointUndoUnderBlackhole runs AtomicInTx and InlineInTx in a
// transaction of the caller's whose context has no deadline, with a body
// that fails after the network started dropping every byte (a blackhole
// partition): the undo of the claim's savepoint cannot reach the server. It
// must give up after the finalise timeout, so the call returns the body's
// error while the partition lasts; it used to wait for the network, with
// no bound.
func TestSavepointUndoUnderBlackhole(t *testing.T) {
	for _, mode := range []string{"AtomicInTx", "InlineInTx"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, "savepoint undo under a blackhole, "+mode, envConfig{
				storeOpts: []idem.Option{idem.WithFinaliseTimeout(100 * time.Millisecond)},
			})
			defer func() { e.pool.Close(); e.proxy.Stop() }()
			ctx := idem.ContextWithScope(idem.ContextWithKey(context.Background(), "undo-"+mode), scope)
			tx, err := e.pool.Begin(ctx)
			require.NoError(t, err)
			// The body writes its row (the inline claim), cuts the network
			// and fails.
			body := func(ctx context.Context, tx pgx.Tx) (receipt, error) {
				k, _ := idem.InlineKeyFrom(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO payments (scope, key, memo, amount, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, 'undo', 1, $3, $4, $5)`, scope, "undo-"+mode, k.Scope, k.Key, k.Fingerprint); err != nil {
					return receipt{}, fmt.Errorf("insert payment: %w", err)
				}
				if err := errors.Join(
					e.tryAddToxic("blackhole-up", "timeout", "upstream", `{"timeout":0}`),
					e.tryAddToxic("blackhole-down", "timeout", "downstream", `{"timeout":0}`)); err != nil {
					return receipt{}, err
				}
				return receipt{}, errBody
			}
			done := make(chan error, 1)
			go func() {
				var err error
				fp := fingerprint(mode, request{Memo: "undo", Amount: 1})
				switch mode {
				case "AtomicInTx":
					_, err = idem.AtomicInTx(ctx, e.store, tx, e.svc.charge, fp, body)
				case "InlineInTx":
					_, err = idem.InlineInTx(ctx, e.store, tx, e.svc.order, fp, paymentByKey, body)
				}
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(hangGuard):
				t.Fatalf("%s did not return while the network dropped every byte", mode)
			}
			require.ErrorIs(t, err, errBody)
			e.removeToxic("blackhole-up")
			e.removeToxic("blackhole-down")
			rctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			_ = tx.Rollback(rctx) // the connection may be closed by now
		})
	}
}
