package templates_test

import (
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
	"github.com/idemgen/idemgen/templates"
)

// TestEveryFormatHasALayout parses the embedded templates and checks that
// each migration format has its file layout and that the shared parts exist.
func TestEveryFormatHasALayout(t *testing.T) {
	tmpl, err := template.New("t").Funcs(template.FuncMap{"para": strings.TrimSpace, "join": strings.Join}).
		ParseFS(templates.FS, "*.sql.tmpl")
	require.NoError(t, err)
	for _, name := range append(migrations.Formats(), "header", "stmts") {
		require.NotNil(t, tmpl.Lookup(name), "template %q", name)
	}
}
