package effectwalk

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/internal/testmod"
)

// loadTestdata writes the module of testdata/name into a temporary
// directory and loads pattern from it.
func loadTestdata(t *testing.T, name string, patterns ...string) (*Program, string) {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, f := range ar.Files {
		files[f.Name] = f.Data
	}
	dir := testmod.New(t, "effects", files)
	p, err := Load(context.Background(), Config{Dir: dir, Patterns: patterns})
	require.NoError(t, err)
	return p, dir
}

// show prints a finding as the tests compare it: the callee, the path,
// the call's file and line, and the reason when allowed.
func show(f Finding) string {
	var path []string
	for _, h := range f.Path {
		path = append(path, h.Func)
	}
	s := fmt.Sprintf("%s via [%s] at %s:%d", f.Callee, strings.Join(path, " "), filepath.Base(f.Pos.Filename), f.Pos.Line)
	if f.Allowed != "" {
		s += " allowed: " + f.Allowed
	}
	return s
}

func TestCheck(t *testing.T) {
	t.Parallel()
	p, _ := loadTestdata(t, "walk.txtar", "./pay")
	const pay = "example.com/effects/pay"
	cases := []struct {
		method   string
		steps    bool
		want     []string
		problems int
	}{
		// Reported.
		{method: "Direct", want: []string{"(*net/http.Client).Do via [] at pay.go:85"}},
		{method: "TwoHelpers", want: []string{"net/http.Post via [Payments.charge notify] at pay.go:97"}},
		{method: "ViaInterface", want: []string{"(*net/http.Client).Do via [httpBank.Transfer httpBank.post] at pay.go:61"}},
		{method: "ViaClosure", want: []string{"net/http.Get via [Payments.ViaClosure.func1] at pay.go:109"}},
		{method: "ViaDependency", want: []string{"(*net/http.Client).Do via [banksdk.Client.Charge banksdk.Client.send] at sdk.go:24"}},
		{method: "PoolExec", want: []string{"(*github.com/jackc/pgx/v5/pgxpool.Pool).Exec via [] at pay.go:122"}},
		{method: "SecondDB", want: []string{"(*database/sql.DB).ExecContext via [] at pay.go:128"}},
		{method: "NoReason", want: []string{"net/http.Post via [notify] at pay.go:97"}, problems: 1},
		{method: "External", steps: true, want: []string{"(*github.com/jackc/pgx/v5/pgxpool.Pool).Exec via [Payments.External.func1] at pay.go:196"}},
		// Allowed.
		{method: "Allowed", want: []string{"(*net/http.Client).Do via [httpBank.Transfer httpBank.post] at pay.go:61 allowed: the bank drops a repeated transfer id"}},
		{method: "AllowedByDoc", want: []string{"net/http.Post via [notify] at pay.go:97 allowed: the notification service drops repeats"}},
		// Near misses.
		{method: "OnTx"},
		{method: "OnSQLTx"},
		{method: "Logs"},
		{method: "FakeOnly"},
		{method: "ExternalNoStep", steps: true},
		{method: "BeginOnPool", want: []string{"github.com/jackc/pgx/v5.BeginFunc via [] at pay.go:211"}},
		{method: "BeginOnTx"},
		{method: "WritesFile", want: []string{"os.WriteFile via [] at pay.go:224"}},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			r, err := p.Check(Method{Pkg: pay, Recv: "Payments", Name: c.method, Steps: c.steps})
			require.NoError(t, err)
			var got []string
			for _, f := range r.Findings {
				got = append(got, show(f))
			}
			require.Equal(t, c.want, got)
			require.Len(t, r.Problems, c.problems)
			require.Equal(t, "pay.go", filepath.Base(r.Pos.Filename))
		})
	}
}

// TestProvenance: a statement's place follows where its handle comes
// from: refused through queries built on the pool or a helper given the
// pool, naming the handle; inside through the same queries rebound to the
// transaction, a helper given it, a struct holding it.
func TestProvenance(t *testing.T) {
	t.Parallel()
	p, _ := loadTestdata(t, "walk.txtar", "./pay")
	const pay = "example.com/effects/pay"
	cases := []struct {
		method string
		want   []string
		handle string
	}{
		{method: "QueriesOnPool", want: []string{"(example.com/effects/pay.DBTX).Exec via [Queries.Insert] at pay.go:43"}, handle: "p.q.db"},
		{method: "QueriesWithTx"},
		{method: "HelperGivenTx"},
		{method: "HelperGivenPool", want: []string{"(example.com/effects/pay.DBTX).Exec via [insert] at pay.go:262"}, handle: "p.pool"},
		{method: "InStruct"},
		{method: "FuncField", want: []string{"net/http.Post via [notify] at pay.go:97"}},
		{method: "ReadsFiles"},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			r, err := p.Check(Method{Pkg: pay, Recv: "Provenance", Name: c.method})
			require.NoError(t, err)
			var got []string
			for _, f := range r.Findings {
				got = append(got, show(f))
			}
			require.Equal(t, c.want, got)
			if c.handle != "" {
				require.Equal(t, c.handle, r.Findings[0].Handle)
			}
		})
	}
}

// TestCheckNewOutput: code that already calls a file the generator is
// about to write (given as an overlay, absent from the disk) type-checks,
// so the method is walked.
func TestCheckNewOutput(t *testing.T) {
	t.Parallel()
	dir := testmod.New(t, "effects", map[string][]byte{"pay/pay.go": []byte(`package pay

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// S posts.
type S struct{}

// M posts.
func (s *S) M(ctx context.Context, tx pgx.Tx) error {
	_, err := http.Get("https://example.com")
	return err
}

// Use calls the wrapper the generator writes.
func Use(w *Wrapped) {}
`)})
	gen := filepath.Join(dir, "pay", "idem_gen.go")
	p, err := Load(context.Background(), Config{Dir: dir, Patterns: []string{"./pay"},
		Overlay: map[string][]byte{gen: []byte("package pay\n\n// Wrapped is written by the generator.\ntype Wrapped struct{ inner *S }\n")}})
	require.NoError(t, err)
	r, err := p.Check(Method{Pkg: "example.com/effects/pay", Recv: "S", Name: "M"})
	require.NoError(t, err)
	require.Len(t, r.Findings, 1)
	require.Equal(t, "net/http.Get", r.Findings[0].Callee)
}
