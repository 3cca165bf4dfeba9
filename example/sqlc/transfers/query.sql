-- name: CreateAccount :one
INSERT INTO accounts (owner, currency, balance_cents)
VALUES (sqlc.arg(owner), sqlc.arg(currency), sqlc.arg(balance_cents))
RETURNING id;

-- name: LockAccounts :many
-- Locks both accounts of a transfer in id order, so that two transfers
-- between the same accounts in opposite directions queue instead of
-- deadlocking.
SELECT id, currency, balance_cents
FROM accounts
WHERE id IN (sqlc.arg(first), sqlc.arg(second))
ORDER BY id
FOR UPDATE;

-- name: AddToBalance :one
UPDATE accounts
SET balance_cents = balance_cents + sqlc.arg(delta_cents)
WHERE id = sqlc.arg(id)
RETURNING balance_cents;

-- name: CreateTransfer :one
INSERT INTO transfers (from_account, to_account, amount_cents, currency, memo)
VALUES (sqlc.arg(from_account), sqlc.arg(to_account), sqlc.arg(amount_cents), sqlc.arg(currency), sqlc.arg(memo))
RETURNING id;

-- name: CountTransfers :one
SELECT count(*) FROM transfers;

-- name: GetBalance :one
SELECT balance_cents FROM accounts WHERE id = sqlc.arg(id);
