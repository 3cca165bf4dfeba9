package idem

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// dbtx is what inlineTx sends statements through: a connection, or the
// caller's transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error)
	Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error)
}

// pendingStmt is a statement sent ahead of the next one the method sends,
// in the same round trip. done, if set, receives its command tag, and
// failed, if set, its error.
type pendingStmt struct {
	sql    string
	args   []any
	done   func(pgconn.CommandTag)
	failed func(error)
}

// fail reports err, the statement's failure, to failed.
func (p pendingStmt) fail(err error) {
	if p.failed != nil {
		p.failed(err)
	}
}

// inlineTx is the pgx.Tx handed to an inline-mode body and to its lookup,
// and to an atomic body (with no table to watch).
// Statements queued as pending (BEGIN or a SAVEPOINT; after a refused claim,
// the ROLLBACK and the statement freeing an expired key) travel in one batch
// with the next statement, which is how the claimed path costs the work's own
// round trips and a replay two. Every error is inspected: a unique violation
// on the table's idempotency index means another row holds the key, whatever
// the method does with the error.
type inlineTx struct {
	conn   *pgx.Conn
	q      dbtx
	real   func(context.Context) (pgx.Tx, error) // a pgx.Tx on the open transaction, for savepoints and large objects
	schema ledger.Inline

	mu       sync.Mutex
	pending  []pendingStmt
	prefixed bool // the first pending statement (BEGIN or SAVEPOINT) was sent
	conflict bool // a statement hit the idempotency index
	ended    bool // the method called Commit or Rollback
	realTx   pgx.Tx
}

var _ pgx.Tx = (*inlineTx)(nil)

// newInlineTx returns an inlineTx whose first statement opens the
// transaction (open: BEGIN or a SAVEPOINT), followed by then (the key's
// lock, for an atomic body).
func newInlineTx(conn *pgx.Conn, q dbtx, schema ledger.Inline, real func(context.Context) (pgx.Tx, error), open string, then ...pendingStmt) *inlineTx {
	return &inlineTx{conn: conn, q: q, real: real, schema: schema, pending: append([]pendingStmt{{sql: open}}, then...)}
}

// opened reports whether BEGIN (or the SAVEPOINT) reached the server.
func (t *inlineTx) opened() bool { t.mu.Lock(); defer t.mu.Unlock(); return t.prefixed }

// lostClaim reports whether a statement hit the idempotency index.
func (t *inlineTx) lostClaim() bool { t.mu.Lock(); defer t.mu.Unlock(); return t.conflict }

func (t *inlineTx) bodyEnded() bool { t.mu.Lock(); defer t.mu.Unlock(); return t.ended }

// reset replaces the pending statements (after a refused claim) and forgets
// the conflict.
func (t *inlineTx) reset(p []pendingStmt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending, t.conflict, t.realTx = p, false, nil
}

// observe records a unique violation on the idempotency index.
// An inlineTx with no table (an atomic body's) watches nothing.
func (t *inlineTx) observe(err error) {
	if t.schema.Table.Name != "" && lostInlineClaim(t.schema, err) {
		t.mu.Lock()
		t.conflict = true
		t.mu.Unlock()
	}
}

// lostInlineClaim reports whether err is a unique violation on the
// table's idempotency index: another row holds the key. On Citus the
// violation is a shard's, raised on a worker and passed on by the
// coordinator without its constraint and table fields: the message names
// the shard's index, the index's name and the shard's id
// ("orders_idempotency_key_idx_102008"), in any language.
func lostInlineClaim(schema ledger.Inline, err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	if pgErr.ConstraintName != "" {
		return pgErr.ConstraintName == schema.IndexName() && pgErr.TableName == schema.Table.Name
	}
	return namesShardOf(pgErr.Message, schema.IndexName())
}

// namesShardOf reports whether msg names a shard of the index or table
// called base: base, an underscore and the shard's id, as a whole word.
func namesShardOf(msg, base string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, base+"_")
		if i < 0 {
			return false
		}
		before := i == 0 || !identByte(rest[i-1])
		rest = rest[i+len(base)+1:]
		digits := 0
		for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
			digits++
		}
		if before && digits > 0 && (digits == len(rest) || !identByte(rest[digits])) {
			return true
		}
	}
}

// identByte reports whether c can be part of an unquoted SQL identifier.
func identByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// takePending returns the pending statements and clears them.
func (t *inlineTx) takePending() []pendingStmt {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending
	t.pending = nil
	return p
}

// batchWith returns a new batch holding p followed by copies of the
// statements of b (a batch that was sent keeps state from that send).
func batchWith(p []pendingStmt, b *pgx.Batch) *pgx.Batch {
	nb := &pgx.Batch{}
	for _, s := range p {
		nb.Queue(s.sql, s.args...)
	}
	if b != nil {
		for _, q := range b.QueuedQueries {
			nb.Queue(q.SQL, q.Arguments...).Fn = q.Fn
		}
	}
	return nb
}

// readPending reads the results of the pending statements at the head of br.
func (t *inlineTx) readPending(br pgx.BatchResults, p []pendingStmt) error {
	for i, s := range p {
		tag, err := br.Exec()
		if err != nil {
			s.fail(err)
			return err
		}
		if i == 0 {
			t.mu.Lock()
			t.prefixed = true
			t.mu.Unlock()
		}
		if s.done != nil {
			s.done(tag)
		}
	}
	return nil
}

// sendPending sends p followed by the statements of b (nil for none) in one
// batch and reads p's results; the caller reads b's and closes the batch.
// On error the batch is closed and nil is returned.
func (t *inlineTx) sendPending(ctx context.Context, p []pendingStmt, b *pgx.Batch) (pgx.BatchResults, error) {
	br := t.q.SendBatch(ctx, batchWith(p, b))
	err := t.readPending(br, p)
	if err == nil {
		return br, nil
	}
	_ = br.Close()
	var pre pgx.ErrPreprocessingBatch
	var pgErr *pgconn.PgError
	if !errors.As(err, &pre) || !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
		return nil, err
	}
	// A statement new to the connection is prepared before the batch runs,
	// and an aborted transaction refuses to prepare anything but its own
	// end. So, until the statement cache is warm, the ROLLBACK (or
	// ROLLBACK TO SAVEPOINT) that ends it goes first, on its own.
	if _, err := t.q.Exec(ctx, p[0].sql, p[0].args...); err != nil {
		return nil, err
	}
	br = t.q.SendBatch(ctx, batchWith(p[1:], b))
	if err := t.readPending(br, p[1:]); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// flush sends the pending statements on their own, for the calls that
// cannot carry them (CopyFrom, Prepare, savepoints, large objects) and when
// the lookup sent nothing.
func (t *inlineTx) flush(ctx context.Context) error {
	p := t.takePending()
	if len(p) == 0 {
		return nil
	}
	br, err := t.sendPending(ctx, p, nil)
	if err != nil {
		return err
	}
	return br.Close()
}

// carriesOptions reports whether args begin with a query option that a
// batch does not accept (an exec mode or result formats).
func carriesOptions(args []any) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
		return true
	}
	return false
}

// Exec sends sql, with any pending statements ahead of it.
func (t *inlineTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if carriesOptions(args) {
		if err := t.flush(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	p := t.takePending()
	if len(p) == 0 {
		tag, err := t.q.Exec(ctx, sql, args...)
		t.observe(err)
		return tag, err
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.sendPending(ctx, p, b)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	t.observe(err)
	return tag, err
}

// Query sends sql, with any pending statements ahead of it.
func (t *inlineTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if carriesOptions(args) {
		if err := t.flush(ctx); err != nil {
			return nil, err
		}
	}
	p := t.takePending()
	if len(p) == 0 {
		rows, err := t.q.Query(ctx, sql, args...)
		t.observe(err)
		if err != nil {
			return rows, err
		}
		return &observedRows{Rows: rows, t: t}, nil
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.sendPending(ctx, p, b)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		t.observe(err)
		return rows, err
	}
	return &observedRows{Rows: rows, t: t, br: br}, nil
}

// QueryRow sends sql, with any pending statements ahead of it.
func (t *inlineTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &rowsRow{rows: rows, err: err}
}

// SendBatch sends b, with any pending statements ahead of it.
func (t *inlineTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p := t.takePending()
	if len(p) == 0 {
		return &observedBatch{BatchResults: t.q.SendBatch(ctx, b), t: t}
	}
	br, err := t.sendPending(ctx, p, b)
	if err != nil {
		return &observedBatch{t: t, err: err}
	}
	return &observedBatch{BatchResults: br, t: t}
}

// CopyFrom sends any pending statements, then copies.
func (t *inlineTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	n, err := t.q.CopyFrom(ctx, table, cols, src)
	t.observe(err)
	return n, err
}

// Prepare sends any pending statements, then prepares.
func (t *inlineTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.q.Prepare(ctx, name, sql)
}

func (t *inlineTx) realTransaction(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.realTx == nil {
		tx, err := t.real(ctx)
		if err != nil {
			return nil, err
		}
		t.realTx = tx
	}
	return t.realTx, nil
}

// Begin starts a savepoint ("pseudo nested transaction").
func (t *inlineTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.realTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

// LargeObjects returns large-object access on the open transaction.
func (t *inlineTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.realTransaction(context.Background())
	if err != nil {
		// pgx.LargeObjects cannot carry an error; the first call on it
		// fails on the broken connection instead.
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Commit refuses: idem commits after checking that the key was written.
func (t *inlineTx) Commit(context.Context) error { t.markEnded(); return errBodyEndedTx }

// Rollback refuses: return an error from the method to roll back.
func (t *inlineTx) Rollback(context.Context) error { t.markEnded(); return errBodyEndedTx }

func (t *inlineTx) markEnded() { t.mu.Lock(); t.ended = true; t.mu.Unlock() }

// Conn returns the underlying connection, after sending any pending
// statements, so that what is sent on it directly runs in the transaction.
// A failure to send them breaks the connection, which the next statement
// on it reports.
func (t *inlineTx) Conn() *pgx.Conn {
	_ = t.flush(context.Background())
	return t.conn
}

// observedRows inspects the rows' error when they end and, for rows read
// from a batch, closes the batch so the connection is free again.
type observedRows struct {
	pgx.Rows
	t    *inlineTx
	br   pgx.BatchResults // nil when the rows did not come from a batch
	done bool
	err  error // from closing the batch
}

func (r *observedRows) finish() {
	if r.done {
		return
	}
	r.done = true
	r.t.observe(r.Rows.Err())
	if r.br != nil {
		r.err = r.br.Close()
		r.t.observe(r.err)
	}
}

// Next advances; at the end it releases the batch.
func (r *observedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

// Close closes the rows and releases the batch.
func (r *observedRows) Close() { r.Rows.Close(); r.finish() }

// Err returns the rows' error, or the batch's.
func (r *observedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// rowsRow is QueryRow over Query.
type rowsRow struct {
	rows pgx.Rows
	err  error
}

// Scan reads the first row into dest, or returns pgx.ErrNoRows.
func (r *rowsRow) Scan(dest ...any) error {
	if r.err != nil {
		if r.rows != nil {
			r.rows.Close()
		}
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// observedBatch inspects every result of a batch the method sends.
type observedBatch struct {
	pgx.BatchResults
	t   *inlineTx
	err error // a pending statement failed
}

// Exec reads the next result.
func (b *observedBatch) Exec() (pgconn.CommandTag, error) {
	if b.err != nil {
		return pgconn.CommandTag{}, b.err
	}
	tag, err := b.BatchResults.Exec()
	b.t.observe(err)
	return tag, err
}

// Query reads the next result as rows.
func (b *observedBatch) Query() (pgx.Rows, error) {
	if b.err != nil {
		return nil, b.err
	}
	rows, err := b.BatchResults.Query()
	b.t.observe(err)
	if err != nil {
		return rows, err
	}
	return &observedRows{Rows: rows, t: b.t}, nil
}

// QueryRow reads the next result as one row.
func (b *observedBatch) QueryRow() pgx.Row {
	rows, err := b.Query()
	return &rowsRow{rows: rows, err: err}
}

// Close reads what is left and frees the connection.
func (b *observedBatch) Close() error {
	if b.BatchResults == nil {
		return b.err
	}
	err := b.BatchResults.Close()
	b.t.observe(err)
	if b.err != nil {
		return b.err
	}
	return err
}
