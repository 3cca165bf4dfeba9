package idem

import "fmt"

// queries holds the SQL for one ledger table. Every statement takes the
// current time as a parameter that is NULL in production, so the database
// clock decides (coalesce($n::timestamptz, now())) and tests can inject one.
type queries struct {
	// read returns the row for (scope, method, key).
	read string
	// claim inserts a done-to-be row inside the work's transaction, or takes
	// over an expired row in the same statement. It returns the fence only if
	// this statement claimed the key.
	claim string
	// claimExternal commits an in-progress row with a lock, or takes over an
	// expired row or an in-progress row whose lock has run out.
	claimExternal string
	// finish stores the response of an atomic claim.
	finish string
	// finishExternal stores the response only if the fence is still ours.
	finishExternal string
	// release deletes an in-progress claim whose fence is still ours.
	release string
	// extend moves locked_until forward if the fence is still ours.
	extend string
	// step records a completed step if the fence is still ours.
	step string
	// sweep deletes up to $2 expired rows.
	sweep string
}

func newQueries(table string) queries {
	const now = "coalesce($1::timestamptz, now())"
	return queries{
		read: fmt.Sprintf(`SELECT fingerprint, status, response, error_name, error_message, steps, fence, expires_at, locked_until, %[2]s
FROM %[1]s WHERE scope = $2 AND method = $3 AND key = $4`, table, now),
		claim: fmt.Sprintf(`INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, created_at, expires_at)
VALUES ($2, $3, $4, $5, 'done', %[2]s, %[2]s + $6::interval)
ON CONFLICT (scope, method, key) DO UPDATE
SET fingerprint = excluded.fingerprint, status = 'done', response = NULL, error_name = NULL, error_message = NULL,
    steps = '{}', fence = t.fence + 1, created_at = excluded.created_at, expires_at = excluded.expires_at, locked_until = NULL
WHERE t.expires_at <= %[2]s
RETURNING fence`, table, now),
		claimExternal: fmt.Sprintf(`INSERT INTO %[1]s AS t (scope, method, key, fingerprint, status, created_at, expires_at, locked_until)
VALUES ($2, $3, $4, $5, 'in_progress', %[2]s, %[2]s + $6::interval, %[2]s + $7::interval)
ON CONFLICT (scope, method, key) DO UPDATE
SET fingerprint = excluded.fingerprint, status = 'in_progress', response = NULL, error_name = NULL, error_message = NULL,
    steps = CASE WHEN t.status = 'in_progress' AND t.fingerprint = excluded.fingerprint THEN t.steps ELSE '{}' END,
    fence = t.fence + 1, created_at = CASE WHEN t.expires_at <= %[2]s THEN excluded.created_at ELSE t.created_at END,
    expires_at = CASE WHEN t.expires_at <= %[2]s THEN excluded.expires_at ELSE t.expires_at END,
    locked_until = excluded.locked_until
WHERE t.expires_at <= %[2]s
   OR (t.status = 'in_progress' AND t.fingerprint = excluded.fingerprint AND t.locked_until <= %[2]s)
RETURNING fence, (xmax <> 0) AS taken_over, steps`, table, now),
		finish: fmt.Sprintf(`UPDATE %[1]s SET response = $5, error_name = $6, error_message = $7
WHERE scope = $2 AND method = $3 AND key = $4 AND fence = $8 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz`, table),
		finishExternal: fmt.Sprintf(`UPDATE %[1]s SET status = 'done', response = $5, error_name = $6, error_message = $7, locked_until = NULL
WHERE scope = $2 AND method = $3 AND key = $4 AND fence = $8 AND status = 'in_progress' AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz`, table),
		release: fmt.Sprintf(`DELETE FROM %[1]s
WHERE scope = $2 AND method = $3 AND key = $4 AND fence = $5 AND status = 'in_progress' AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz`, table),
		extend: fmt.Sprintf(`UPDATE %[1]s SET locked_until = %[2]s + $6::interval
WHERE scope = $2 AND method = $3 AND key = $4 AND fence = $5 AND status = 'in_progress'`, table, now),
		step: fmt.Sprintf(`UPDATE %[1]s SET steps = jsonb_set(steps, ARRAY[$6::text], $7::jsonb)
WHERE scope = $2 AND method = $3 AND key = $4 AND fence = $5 AND status = 'in_progress' AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz`, table),
		sweep: fmt.Sprintf(`DELETE FROM %[1]s WHERE (scope, method, key) IN (
    SELECT scope, method, key FROM %[1]s WHERE expires_at <= %[2]s
    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, table, now),
	}
}
