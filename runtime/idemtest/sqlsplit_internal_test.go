package idemtest

import (
	"strings"
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
		want []statement
	}{
		{"two statements", "SELECT 1;\nSELECT 2;\n", []statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}},
		{"last without semicolon", "SELECT 1;\n\nSELECT 2\n\n", []statement{{"SELECT 1;", 1}, {"SELECT 2", 3}}},
		{"comments between are dropped", "-- head; here\n/* a; b */\nSELECT 1; -- tail;\n", []statement{{"SELECT 1;", 3}}},
		{"empty statements", ";;\n ; SELECT 1;;", []statement{{"SELECT 1;", 2}}},
		{"single quotes", "SELECT 'a;b', 'it''s; x';", []statement{{"SELECT 'a;b', 'it''s; x';", 1}}},
		{"escape string", `SELECT E'a\';b', e'\\';SELECT 2;`, []statement{{`SELECT E'a\';b', e'\\';`, 1}, {"SELECT 2;", 1}}},
		{"identifier ending in e is no escape string", `SELECT some'x\';`, []statement{{`SELECT some'x\';`, 1}}},
		{"double quotes", `CREATE TABLE "a;""b" (id int);`, []statement{{`CREATE TABLE "a;""b" (id int);`, 1}}},
		{"dollar quotes", "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;\nSELECT 2;", []statement{
			{"CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;", 1}, {"SELECT 2;", 2}}},
		{"tagged dollar quotes nest other tags", "SELECT $a$ $$;$$ $b$ ; $a$;", []statement{{"SELECT $a$ $$;$$ $b$ ; $a$;", 1}}},
		{"parameters and identifiers with $", "PREPARE p AS SELECT $1; SELECT a$b$c FROM t;", []statement{
			{"PREPARE p AS SELECT $1;", 1}, {"SELECT a$b$c FROM t;", 1}}},
		{"nested block comments", "SELECT /* a /* b; */ c; */ 1;", []statement{{"SELECT /* a /* b; */ c; */ 1;", 1}}},
		{"line comment inside a statement", "SELECT 1 -- x;\n+ 2;", []statement{{"SELECT 1 -- x;\n+ 2;", 1}}},
		{"DO block", "SET lock_timeout = '5s';\n" + doBlock + "\nRESET lock_timeout;", []statement{
			{"SET lock_timeout = '5s';", 1}, {doBlock, 2}, {"RESET lock_timeout;", 18}}},
		{"BEGIN ATOMIC body", "CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql\nBEGIN ATOMIC\n  SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;\n  SELECT 2;\nEND;\nSELECT 3;", []statement{
			{"CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql\nBEGIN ATOMIC\n  SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;\n  SELECT 2;\nEND;", 1}, {"SELECT 3;", 6}}},
		{"transaction control", "BEGIN;\nSELECT CASE WHEN true THEN 1 END;\nEND;\nSELECT 1;", []statement{
			{"BEGIN;", 1}, {"SELECT CASE WHEN true THEN 1 END;", 2}, {"END;", 3}, {"SELECT 1;", 4}}},
		{"begin as a column name", "CREATE TABLE t (begin int);\nSELECT begin FROM t;\nSELECT 1;", []statement{
			{"CREATE TABLE t (begin int);", 1}, {"SELECT begin FROM t;", 2}, {"SELECT 1;", 3}}},
		{"CREATE OR REPLACE PROCEDURE", "create or replace procedure p() language sql begin atomic insert into t values (1); end; select 1;", []statement{
			{"create or replace procedure p() language sql begin atomic insert into t values (1); end;", 1}, {"select 1;", 1}}},
		{"semicolon inside parentheses", "CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);\nSELECT 1;", []statement{
			{"CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);", 1}, {"SELECT 1;", 2}}},
		{"multi-byte identifiers", "SELECT 1 AS é$x$;", []statement{{"SELECT 1 AS é$x$;", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splitStatements(tt.src, 1)
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
		_, err := splitStatements(src, 1)
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), want, src)
	}
}

func TestParseGoose(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want upScript
	}{
		{"up only, down skipped", "-- header\n-- +goose Up\nCREATE TABLE a (id int);\nINSERT INTO a\nVALUES (1); -- row\n-- +goose Down\nDROP TABLE a;\n",
			upScript{stmts: []statement{{"CREATE TABLE a (id int);", 3}, {"INSERT INTO a\nVALUES (1); -- row", 4}}, mode: inTx}},
		{"no transaction", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			upScript{stmts: []statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}, mode: noTx}},
		{"statement block", "-- +goose Up\nSET x = 1;\n-- +goose StatementBegin\n" + doBlock + "\n-- +goose StatementEnd\nRESET x;\n",
			upScript{stmts: []statement{{"SET x = 1;", 2}, {doBlock, 4}, {"RESET x;", 21}}, mode: inTx}},
		{"annotations in any case", "--  +GOOSE  up\nSELECT 1;\n-- +goose DOWN\nSELECT 2;\n",
			upScript{stmts: []statement{{"SELECT 1;", 2}}, mode: inTx}},
		{"semicolon inside a line does not end the statement", "-- +goose Up\nSELECT 'a;', 1\n;\n",
			upScript{stmts: []statement{{"SELECT 'a;', 1\n;", 2}}, mode: inTx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGoose(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseGooseErrors(t *testing.T) {
	tests := map[string]string{
		"no up":                "CREATE TABLE a (id int);\n",
		"missing semicolon":    "-- +goose Up\nSELECT 1\n-- +goose Down\n",
		"missing end":          "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n",
		"DO block unwrapped":   "-- +goose Up\n" + doBlock + "\n",
		"unsupported envsub":   "-- +goose ENVSUB ON\n-- +goose Up\nSELECT 1;\n",
		"end without begin":    "-- +goose Up\n-- +goose StatementEnd\n",
		"begin in a statement": "-- +goose Up\nSELECT\n-- +goose StatementBegin\n1;\n-- +goose StatementEnd\n",
	}
	want := map[string]string{
		"no up":                "no -- +goose Up annotation",
		"missing semicolon":    "line 3: the statement that starts at line 2 does not end with ;",
		"missing end":          "line 3: the statement that starts here does not end with ;",
		"DO block unwrapped":   "wrap a statement that holds such lines (a DO block, a function body) in -- +goose StatementBegin and -- +goose StatementEnd",
		"unsupported envsub":   `annotation "-- +goose ENVSUB ON" is not supported`,
		"end without begin":    "StatementEnd without StatementBegin",
		"begin in a statement": "line 3: -- +goose StatementBegin inside a statement that started at line 2",
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseGoose(src)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want[name])
		})
	}
}

func TestParseOtherFormats(t *testing.T) {
	tests := []struct {
		name, format, src string
		want              upScript
	}{
		{"tern", "tern", "SELECT 1;\n---- create above / drop below ----\nSELECT 2;\n",
			upScript{stmts: []statement{{"SELECT 1;", 1}}, mode: inTx}},
		{"tern disable-tx", "tern", "-- x\n---- tern: disable-tx ----\nCREATE INDEX CONCURRENTLY i ON a (id);\n---- create above / drop below ----\n---- tern: disable-tx ----\nDROP INDEX i;\n",
			upScript{stmts: []statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}, mode: noTx}},
		{"dbmate", "dbmate", "-- head\n-- migrate:up\nSELECT 1;\n-- migrate:down\nSELECT 2;\n",
			upScript{stmts: []statement{{"SELECT 1;", 3}}, mode: inTx}},
		{"dbmate transaction:false", "dbmate", "-- migrate:up transaction:false\nCREATE INDEX CONCURRENTLY i ON a (id);\n-- migrate:down transaction:false\nDROP INDEX i;\n",
			upScript{stmts: []statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 2}}, mode: noTx}},
		{"atlas", "atlas", "SELECT 1;\nSELECT 2;\n",
			upScript{stmts: []statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}, mode: inTx}},
		{"atlas txmode none", "atlas", "-- atlas:txmode none\n\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			upScript{stmts: []statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}, mode: noTx}},
		{"golang-migrate implicit transaction", "golang-migrate", "SELECT 1;\nSELECT 2;\n",
			upScript{stmts: []statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}, mode: inTx}},
		{"golang-migrate own transaction", "golang-migrate", "BEGIN;\nSELECT 1;\nCOMMIT;\n",
			upScript{stmts: []statement{{"BEGIN;", 1}, {"SELECT 1;", 2}, {"COMMIT;", 3}}, mode: noTx}},
		{"golang-migrate lone statement", "golang-migrate", "-- x\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			upScript{stmts: []statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 2}}, mode: noTx}},
		{"plain", "plain", "BEGIN;\nSELECT 1;\nCOMMIT;\n",
			upScript{stmts: []statement{{"BEGIN;", 1}, {"SELECT 1;", 2}, {"COMMIT;", 3}}, mode: noTx}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUp(tt.format, tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for src, want := range map[string]string{
		"dbmate:SELECT 1;":                          "no -- migrate:up section",
		"dbmate:-- migrate:up foo:bar\n":            `option "foo:bar" is not supported`,
		"atlas:-- atlas:delimiter \\n\\n\nSELECT 1": "directive -- atlas:delimiter",
		"tern:SELECT {{ .x }};":                     "template syntax",
	} {
		format, body, _ := strings.Cut(src, ":")
		_, err := parseUp(format, body)
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), want, src)
	}
}
