package idemledger

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Key is one key as inspect reports it (-json prints it as is).
type Key struct {
	Table       string `json:"table"`
	Mode        string `json:"mode"` // ledger or inline
	Scope       string `json:"scope"`
	Method      string `json:"method,omitempty"` // ledger rows only
	Key         string `json:"key"`
	Status      string `json:"status"` // in_progress or done (inline keys are always done)
	State       string `json:"state"`  // what a retry with the key meets now, in words
	Fingerprint string `json:"fingerprint"`
	// LastMismatch is the last request refused with the key for another
	// fingerprint, when the ledger recorded one.
	LastMismatch *Mismatch       `json:"last_mismatch,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	Expired      bool            `json:"expired"` // waiting for the sweep
	LockedUntil  *time.Time      `json:"locked_until,omitempty"`
	LockLive     bool            `json:"lock_live"`
	Fence        int64           `json:"fence,omitempty"`
	Intention    string          `json:"intention,omitempty"`
	Steps        json.RawMessage `json:"steps,omitempty"`
	Response     *Response       `json:"response,omitempty"`
	Error        *StoredError    `json:"error,omitempty"`
	Request      *RequestCheck   `json:"request,omitempty"`
	Request2     *RequestCheck   `json:"request2,omitempty"` // the second -request
	// Differs names the fields of the second -request that change the
	// first's fingerprint (JSON names, nested ones with dots).
	Differs []string  `json:"differs,omitempty"`
	Now     time.Time `json:"now"` // the database's clock when the row was read

	fp  []byte
	tid ledger.Ident
	// mismatches: the table records mismatches (see table.mismatches).
	mismatches bool
	// mismatchFP is the recorded mismatch's fingerprint.
	mismatchFP []byte
}

// Mismatch is the last request refused with a key for another fingerprint
// (idem.ErrMismatch, HTTP 422), as the ledger recorded it.
type Mismatch struct {
	At          time.Time `json:"at"`
	Fingerprint string    `json:"fingerprint"` // the refused request's
	// Earlier: the refusal came before the row's current request was
	// claimed (the key was used again after its retention window since),
	// so it refused the key's previous use.
	Earlier bool `json:"earlier,omitempty"`
}

// Response is a stored response: JSON when it is JSON (the generated codec
// stores JSON), the bytes in hex otherwise. An inline key's response is its
// row, without the key columns.
type Response struct {
	Bytes int             `json:"bytes"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Hex   string          `json:"hex,omitempty"`
}

// StoredError is a final error stored in place of a response.
type StoredError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// RequestCheck is what inspect -request found.
type RequestCheck struct {
	File        string `json:"file"`
	Fingerprint string `json:"fingerprint"`
	Verdict     string `json:"verdict"` // replay or mismatch
	// LastRefused: the file is the request last refused with the key (its
	// fingerprint is the recorded mismatch's).
	LastRefused bool `json:"last_refused,omitempty"`
}

func newResponse(b []byte) *Response {
	if b == nil {
		return nil
	}
	r := &Response{Bytes: len(b)}
	if json.Valid(b) {
		r.JSON = json.RawMessage(b)
	} else {
		r.Hex = hex.EncodeToString(b)
	}
	return r
}

// ledgerKeys reads the rows of a ledger table under (scope, key) whose
// method matches method.
func ledgerKeys(ctx context.Context, db *pgx.Conn, t table, scope, method, key string) ([]Key, error) {
	rows, err := db.Query(ctx, t.statements().Keys, scope, key, method)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		k := Key{Table: t.Name(), Mode: t.Mode(), tid: t.id, mismatches: t.mismatches}
		var resp []byte
		var errName, errMsg, steps, intention *string
		var mismatchAt *time.Time
		err := r.Scan(&k.Scope, &k.Method, &k.Key, &k.fp, &k.Status, &resp, &errName, &errMsg,
			&steps, &k.Fence, &k.CreatedAt, &k.ExpiresAt, &k.LockedUntil, &intention, &mismatchAt, &k.mismatchFP, &k.Now)
		if err != nil {
			return k, err
		}
		k.Response = newResponse(resp)
		if errName != nil {
			k.Error = &StoredError{Name: *errName, Message: deref(errMsg)}
		}
		if steps != nil && *steps != "{}" {
			k.Steps = json.RawMessage(*steps)
		}
		k.Intention = deref(intention)
		if mismatchAt != nil {
			k.LastMismatch = &Mismatch{At: *mismatchAt, Fingerprint: hex.EncodeToString(k.mismatchFP), Earlier: mismatchAt.Before(k.CreatedAt)}
		}
		k.settle()
		return k, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	return keys, nil
}

// inlineKeys reads the row of an inline table that holds (scope, key).
func inlineKeys(ctx context.Context, db *pgx.Conn, t table, scope, key string, retention time.Duration) ([]Key, error) {
	rows, err := db.Query(ctx, t.inlineStatements().Keys, scope, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		k := Key{Table: t.Name(), Mode: t.Mode(), Status: "done", tid: t.id}
		var claimed *time.Time
		var row []byte
		if err := r.Scan(&k.Scope, &k.Key, &k.fp, &claimed, &k.Now, &row); err != nil {
			return k, err
		}
		if claimed != nil {
			k.CreatedAt = *claimed
		}
		k.ExpiresAt = k.CreatedAt.Add(retention)
		k.Response = newResponse(row)
		k.settle()
		return k, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name(), err)
	}
	return keys, nil
}

// settle fills the fields derived from the row and the database's clock,
// with the runtime's rules: a live lock is never taken over nor swept; an
// expired row without one is new to the next claim and gone at the next
// sweep.
func (k *Key) settle() {
	k.Fingerprint = hex.EncodeToString(k.fp)
	k.LockLive = k.LockedUntil != nil && k.LockedUntil.After(k.Now)
	k.Expired = !k.ExpiresAt.After(k.Now) && !k.LockLive
	switch {
	case k.Expired:
		k.State = "expired: the next request with this key runs as new; the sweep removes it"
	case k.Status == "in_progress" && k.LockLive:
		k.State = fmt.Sprintf("in progress: a call holds the lock for %s more; a retry gets idem.ErrInProgress (HTTP 409)", k.LockedUntil.Sub(k.Now).Round(time.Millisecond))
	case k.Status == "in_progress":
		k.State = "in progress, lock expired: the next retry with the same request takes the key over (fence + 1)"
	case k.Error != nil:
		k.State = "done with final error " + k.Error.Name + ": a retry with the same request gets the error again"
	default:
		k.State = "done: a retry with the same request replays the stored response"
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// findKeys reads (scope, key) in every table, the ledger's rows filtered by
// method.
func findKeys(ctx context.Context, db *pgx.Conn, c *common, scope, method, key string) ([]Key, error) {
	tables, err := findTables(ctx, db, c.table)
	if err != nil {
		return nil, err
	}
	var out []Key
	for _, t := range tables {
		var keys []Key
		if t.inline && method != "" && c.table == "" {
			continue // -method names a ledger method; an inline table is named with -table
		}
		if t.inline {
			keys, err = inlineKeys(ctx, db, t, scope, key, c.retention)
		} else {
			keys, err = ledgerKeys(ctx, db, t, scope, method, key)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}
