package templates_test

import (
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/templates"
)

// TestTemplatesParse parses the embedded templates and checks that the parts
// gen/migrations renders exist.
func TestTemplatesParse(t *testing.T) {
	tmpl, err := template.New("t").Funcs(template.FuncMap{"para": strings.TrimSpace, "join": strings.Join}).
		ParseFS(templates.FS, "*.sql.tmpl")
	require.NoError(t, err)
	for _, name := range []string{"header", "stmts", "lockretry"} {
		require.NotNil(t, tmpl.Lookup(name), "template %q", name)
	}
}
