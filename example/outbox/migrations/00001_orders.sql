-- The outbox example's own table. River's tables come from rivermigrate
-- (River's own migrations); the ledger from the migrations idemgen
-- generates next to this file.

-- +goose Up
CREATE TABLE IF NOT EXISTS orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    email text NOT NULL,
    amount_cents bigint NOT NULL CHECK (amount_cents > 0)
);

-- +goose Down
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '60s';
-- Down drops what Up created, so squawk's ban-drop-table does not apply here.
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS orders;
