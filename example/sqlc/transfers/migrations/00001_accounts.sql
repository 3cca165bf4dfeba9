-- The example service's own tables; sqlc reads them (sqlc.yaml) to type the
-- queries in query.sql. The ledger (idempotency_keys) comes from the
-- migrations idemgen generates next to this file.

-- +goose Up
-- Bounded waits: a foreign key locks the table it references. SET LOCAL
-- lasts until this migration's transaction ends.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '60s';
CREATE TABLE IF NOT EXISTS accounts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner text NOT NULL,
    currency text NOT NULL,
    balance_cents bigint NOT NULL CHECK (balance_cents >= 0)
);

CREATE TABLE IF NOT EXISTS transfers (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_account bigint NOT NULL REFERENCES accounts (id),
    to_account bigint NOT NULL REFERENCES accounts (id),
    amount_cents bigint NOT NULL CHECK (amount_cents > 0),
    currency text NOT NULL,
    memo text NOT NULL
);

-- +goose Down
-- Down drops what Up created, so squawk's ban-drop-table does not apply here.
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS transfers;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS accounts;
