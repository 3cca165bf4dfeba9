package migformat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// read reads the up part of src in the format called name.
func read(t *testing.T, name, src string) (Script, error) {
	t.Helper()
	f, err := Lookup(name)
	require.NoError(t, err)
	return f.Up(src)
}

func TestParseGoose(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want Script
	}{
		{"up only, down skipped", "-- header\n-- +goose Up\nCREATE TABLE a (id int);\nINSERT INTO a\nVALUES (1); -- row\n-- +goose Down\nDROP TABLE a;\n",
			Script{Statements: []Statement{{"CREATE TABLE a (id int);", 3}, {"INSERT INTO a\nVALUES (1); -- row", 4}}, InTx: true}},
		{"no transaction", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			Script{Statements: []Statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}}},
		{"statement block", "-- +goose Up\nSET x = 1;\n-- +goose StatementBegin\n" + doBlock + "\n-- +goose StatementEnd\nRESET x;\n",
			Script{Statements: []Statement{{"SET x = 1;", 2}, {doBlock, 4}, {"RESET x;", 21}}, InTx: true}},
		{"annotations in any case", "--  +GOOSE  up\nSELECT 1;\n-- +goose DOWN\nSELECT 2;\n",
			Script{Statements: []Statement{{"SELECT 1;", 2}}, InTx: true}},
		{"semicolon inside a line does not end the statement", "-- +goose Up\nSELECT 'a;', 1\n;\n",
			Script{Statements: []Statement{{"SELECT 'a;', 1\n;", 2}}, InTx: true}},
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
		want              Script
	}{
		{"tern", "tern", "SELECT 1;\n---- create above / drop below ----\nSELECT 2;\n",
			Script{Statements: []Statement{{"SELECT 1;", 1}}, InTx: true}},
		{"tern disable-tx", "tern", "-- x\n---- tern: disable-tx ----\nCREATE INDEX CONCURRENTLY i ON a (id);\n---- create above / drop below ----\n---- tern: disable-tx ----\nDROP INDEX i;\n",
			Script{Statements: []Statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}}},
		{"dbmate", "dbmate", "-- head\n-- migrate:up\nSELECT 1;\n-- migrate:down\nSELECT 2;\n",
			Script{Statements: []Statement{{"SELECT 1;", 3}}, InTx: true}},
		{"dbmate transaction:false", "dbmate", "-- migrate:up transaction:false\nCREATE INDEX CONCURRENTLY i ON a (id);\n-- migrate:down transaction:false\nDROP INDEX i;\n",
			Script{Statements: []Statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 2}}}},
		{"atlas", "atlas", "SELECT 1;\nSELECT 2;\n",
			Script{Statements: []Statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}, InTx: true}},
		{"atlas txmode none", "atlas", "-- atlas:txmode none\n\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			Script{Statements: []Statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 3}}}},
		{"golang-migrate implicit transaction", "golang-migrate", "SELECT 1;\nSELECT 2;\n",
			Script{Statements: []Statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}, InTx: true}},
		{"golang-migrate own transaction", "golang-migrate", "BEGIN;\nSELECT 1;\nCOMMIT;\n",
			Script{Statements: []Statement{{"BEGIN;", 1}, {"SELECT 1;", 2}, {"COMMIT;", 3}}}},
		{"golang-migrate lone statement", "golang-migrate", "-- x\nCREATE INDEX CONCURRENTLY i ON a (id);\n",
			Script{Statements: []Statement{{"CREATE INDEX CONCURRENTLY i ON a (id);", 2}}}},
		{"plain", "plain", "BEGIN;\nSELECT 1;\nCOMMIT;\n",
			Script{Statements: []Statement{{"BEGIN;", 1}, {"SELECT 1;", 2}, {"COMMIT;", 3}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(t, tt.format, tt.src)
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
		_, err := read(t, format, body)
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), want, src)
	}
}
