package migformat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// doBlock is a PL/pgSQL DO block of the kind generated migrations hold: a
// lock-retry loop whose body has semicolons, quotes and comments.
const doBlock = `DO $retry$
DECLARE
    tries int := 0; -- a comment; with a semicolon
BEGIN
    LOOP
        BEGIN
            EXECUTE 'ALTER TABLE "t;x" ADD COLUMN c text'; /* ; */
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            IF tries >= 5 THEN RAISE EXCEPTION 'gave up after % tries; it''s locked', tries; END IF;
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
END
$retry$;`

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []Statement
	}{
		{"two statements", "SELECT 1;\nSELECT 2;\n", []Statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}},
		{"last without semicolon", "SELECT 1;\n\nSELECT 2\n\n", []Statement{{"SELECT 1;", 1}, {"SELECT 2", 3}}},
		{"comments between are dropped", "-- head; here\n/* a; b */\nSELECT 1; -- tail;\n", []Statement{{"SELECT 1;", 3}}},
		{"empty statements", ";;\n ; SELECT 1;;", []Statement{{"SELECT 1;", 2}}},
		{"single quotes", "SELECT 'a;b', 'it''s; x';", []Statement{{"SELECT 'a;b', 'it''s; x';", 1}}},
		{"escape string", `SELECT E'a\';b', e'\\';SELECT 2;`, []Statement{{`SELECT E'a\';b', e'\\';`, 1}, {"SELECT 2;", 1}}},
		{"identifier ending in e is no escape string", `SELECT some'x\';`, []Statement{{`SELECT some'x\';`, 1}}},
		{"double quotes", `CREATE TABLE "a;""b" (id int);`, []Statement{{`CREATE TABLE "a;""b" (id int);`, 1}}},
		{"dollar quotes", "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;\nSELECT 2;", []Statement{
			{"CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;", 1}, {"SELECT 2;", 2}}},
		{"tagged dollar quotes nest other tags", "SELECT $a$ $$;$$ $b$ ; $a$;", []Statement{{"SELECT $a$ $$;$$ $b$ ; $a$;", 1}}},
		{"parameters and identifiers with $", "PREPARE p AS SELECT $1; SELECT a$b$c FROM t;", []Statement{
			{"PREPARE p AS SELECT $1;", 1}, {"SELECT a$b$c FROM t;", 1}}},
		{"nested block comments", "SELECT /* a /* b; */ c; */ 1;", []Statement{{"SELECT /* a /* b; */ c; */ 1;", 1}}},
		{"line comment inside a statement", "SELECT 1 -- x;\n+ 2;", []Statement{{"SELECT 1 -- x;\n+ 2;", 1}}},
		{"DO block", "SET lock_timeout = '5s';\n" + doBlock + "\nRESET lock_timeout;", []Statement{
			{"SET lock_timeout = '5s';", 1}, {doBlock, 2}, {"RESET lock_timeout;", 18}}},
		{"BEGIN ATOMIC body", "CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql\nBEGIN ATOMIC\n  SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;\n  SELECT 2;\nEND;\nSELECT 3;", []Statement{
			{"CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql\nBEGIN ATOMIC\n  SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;\n  SELECT 2;\nEND;", 1}, {"SELECT 3;", 6}}},
		{"transaction control", "BEGIN;\nSELECT CASE WHEN true THEN 1 END;\nEND;\nSELECT 1;", []Statement{
			{"BEGIN;", 1}, {"SELECT CASE WHEN true THEN 1 END;", 2}, {"END;", 3}, {"SELECT 1;", 4}}},
		{"begin as a column name", "CREATE TABLE t (begin int);\nSELECT begin FROM t;\nSELECT 1;", []Statement{
			{"CREATE TABLE t (begin int);", 1}, {"SELECT begin FROM t;", 2}, {"SELECT 1;", 3}}},
		{"CREATE OR REPLACE PROCEDURE", "create or replace procedure p() language sql begin atomic insert into t values (1); end; select 1;", []Statement{
			{"create or replace procedure p() language sql begin atomic insert into t values (1); end;", 1}, {"select 1;", 1}}},
		{"semicolon inside parentheses", "CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);\nSELECT 1;", []Statement{
			{"CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);", 1}, {"SELECT 1;", 2}}},
		{"multi-byte identifiers", "SELECT 1 AS é$x$;", []Statement{{"SELECT 1 AS é$x$;", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := split(tt.src, 1)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSplitStatementsUnterminated(t *testing.T) {
	tests := map[string]string{
		"SELECT 1;\nSELECT 'abc;":               "line 2: string is not closed",
		"SELECT \"abc;":                         "line 1: quoted identifier is not closed",
		"SELECT 1;\n\nDO $x$ BEGIN END $y$;":    "line 3: dollar-quoted string $x$ is not closed",
		"SELECT 1; /* a /* b */":                "line 1: block comment is not closed",
		"SELECT E'\\';":                         "line 1: string is not closed",
		"SELECT 1;\nDO $$\nBEGIN\n  PERFORM 1;": "line 2: dollar-quoted string $$ is not closed",
	}
	for src, want := range tests {
		_, err := split(src, 1)
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), want, src)
	}
}
