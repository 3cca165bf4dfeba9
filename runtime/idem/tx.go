package idem

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipelinedTx is the pgx.Tx handed to an atomic body. Its BEGIN was sent in
// the same round trip as the claim, and its COMMIT goes out with the response
// write, which is how the claimed path stays within one extra round trip of the
// same work without idempotency. Queries go straight to the connection.
type pipelinedTx struct {
	conn *pgx.Conn

	mu    sync.Mutex
	pgxTx pgx.Tx // a pgx transaction object on the same, already open, transaction; made on demand
	ended bool   // the body called Commit or Rollback
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// real returns a pgx.Tx on the connection's open transaction, for savepoints
// and large objects. BeginQuery replaces BEGIN with a no-op, since the
// transaction is already open.
func (t *pipelinedTx) real(ctx context.Context) (pgx.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pgxTx == nil {
		tx, err := t.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: "SELECT 1"})
		if err != nil {
			return nil, err
		}
		t.pgxTx = tx
	}
	return t.pgxTx, nil
}

// Begin starts a savepoint ("pseudo nested transaction").
func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.real(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

// Commit refuses: idem commits together with the stored response.
func (t *pipelinedTx) Commit(context.Context) error { t.markEnded(); return errBodyEndedTx }

// Rollback refuses: return an error from the body to roll back.
func (t *pipelinedTx) Rollback(context.Context) error { t.markEnded(); return errBodyEndedTx }

func (t *pipelinedTx) markEnded() {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
}

func (t *pipelinedTx) bodyEnded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// CopyFrom delegates to the connection.
func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// SendBatch delegates to the connection.
func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects returns large-object access on the open transaction. It costs
// one round trip the first time.
func (t *pipelinedTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.real(context.Background())
	if err != nil {
		// pgx.LargeObjects cannot carry an error; the first call on it
		// will fail on the broken connection instead.
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Prepare delegates to the connection.
func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Exec delegates to the connection.
func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query delegates to the connection.
func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow delegates to the connection.
func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// Conn returns the underlying connection.
func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }
