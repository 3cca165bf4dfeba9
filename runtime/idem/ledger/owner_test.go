package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tableStatement matches SQL text that names its table by a format verb or
// by the default ledger table's name: a statement against a ledger or an
// inline table, whose text this package owns. The project writes SQL's
// keywords in capitals, which is what tells a statement from a sentence
// ("the request from %s").
var tableStatement = regexp.MustCompile(`\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE|FROM|JOIN|LOCK\s+TABLE|ALTER\s+TABLE|TRUNCATE)\s+(%|"?idempotency_keys\b)`)

// ownedElsewhere are the files outside this package allowed to spell one,
// each with the reason.
var ownedElsewhere = map[string]string{
	"gen/migrations/lockretry.go": "the migrations' lock-retry DO block, LOCK TABLE on whichever table a migration alters: migration machinery, not a ledger statement",
}

// TestStatementsHaveOneOwner: no non-test Go file of the runtime, the
// ledger command, the test harness or the migration renderer spells a
// statement against a ledger or an inline table; they take it from this
// package (statements.golden pins every text it holds).
func TestStatementsHaveOneOwner(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, dir := range []string{"runtime/idem", "runtime/idemledger", "runtime/idemtest", "cmd/idemledger", "gen/migrations"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		require.NoError(t, err)
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			rel := dir + "/" + name
			found := statementsIn(t, filepath.Join(root, rel))
			if _, ok := ownedElsewhere[rel]; ok {
				assert.NotEmpty(t, found, "%s is allowed a statement it no longer spells: drop it from ownedElsewhere", rel)
				continue
			}
			for _, f := range found {
				assert.Failf(t, "a statement against a ledger or inline table outside runtime/idem/ledger",
					"%s:%s: move it into runtime/idem/ledger (and statements.golden)", rel, f)
			}
		}
	}
}

// statementsIn returns the line:column and text of each string literal of
// file that tableStatement matches.
func statementsIn(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil && tableStatement.MatchString(s) {
			p := fset.Position(lit.Pos())
			found = append(found, strconv.Itoa(p.Line)+":"+strconv.Itoa(p.Column)+": "+strconv.Quote(s))
		}
		return true
	})
	return found
}
