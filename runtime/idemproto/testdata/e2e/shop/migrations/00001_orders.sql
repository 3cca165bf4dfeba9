-- The test shop's own tables.

-- +goose Up
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '60s';
CREATE TABLE IF NOT EXISTS placed (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, amount bigint NOT NULL);
CREATE TABLE IF NOT EXISTS orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ref text NOT NULL, amount bigint NOT NULL, note text NOT NULL);

-- +goose Down
-- Down drops what Up created, so squawk's ban-drop-table does not apply here.
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS orders;
-- squawk-ignore ban-drop-table
DROP TABLE IF EXISTS placed;
