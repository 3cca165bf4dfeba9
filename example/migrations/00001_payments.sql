-- The example service's own tables. The ledger (idempotency_keys) comes from
-- the migrations idemgen generates next to this file.

-- +goose Up
-- Bounded waits: a foreign key locks the table it references. SET LOCAL
-- lasts until this migration's transaction ends.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '60s';
CREATE TABLE IF NOT EXISTS payments (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account text NOT NULL,
    amount_cents bigint NOT NULL CHECK (amount_cents > 0),
    currency text NOT NULL,
    card_last4 text NOT NULL,
    description text NOT NULL,
    refunded_cents bigint NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS ledger_entries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id bigint NOT NULL REFERENCES payments (id),
    account text NOT NULL,
    amount_cents bigint NOT NULL,
    kind text NOT NULL
);

CREATE TABLE IF NOT EXISTS balances (
    account text PRIMARY KEY,
    balance_cents bigint NOT NULL CHECK (balance_cents >= 0)
);

CREATE TABLE IF NOT EXISTS refunds (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id bigint NOT NULL REFERENCES payments (id),
    amount_cents bigint NOT NULL,
    reason text NOT NULL
);

CREATE TABLE IF NOT EXISTS payouts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reserve_key text NOT NULL UNIQUE,
    account text NOT NULL,
    amount_cents bigint NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    bank_ref text
);

-- +goose Down
-- Down drops what Up created, so squawk's ban-drop-table does not apply here.
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS payouts;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS refunds;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS balances;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS ledger_entries;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS payments;
