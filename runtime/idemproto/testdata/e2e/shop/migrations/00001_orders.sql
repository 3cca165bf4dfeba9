-- +goose Up
CREATE TABLE placed (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, amount bigint NOT NULL);
CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ref text NOT NULL, amount bigint NOT NULL, note text NOT NULL);

-- +goose Down
DROP TABLE orders;
DROP TABLE placed;
