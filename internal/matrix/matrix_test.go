package matrix

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/idemgen/idemgen/gen"
)

// checks is how many values rapid draws per case: enough to meet nil,
// empty and full values of every shape, few enough to keep CI quick.
const checks = "30"

var update = flag.Bool("update", false, "rewrite the golden stderr of testdata/matrix and the table of supported types in docs/types.md")

// matrixCase is one line of a group's cases section:
//
//	resp ok Name TYPE   a response type, accepted
//	req no Name TYPE    a request type, refused
type matrixCase struct {
	group, side, name, typ string
	ok                     bool
}

type group struct {
	name, path string
	ar         *txtar.Archive
	decls      []byte
	cases      []matrixCase
}

// imports known to case type expressions.
var knownImports = map[string]string{
	"time.": "time", "json.": "encoding/json", "netip.": "net/netip", "big.": "math/big",
	"uuid.": "github.com/google/uuid", "decimal.": "github.com/shopspring/decimal",
	"pgtype.": "github.com/jackc/pgx/v5/pgtype", "sql.": "database/sql",
	"testpb.": "github.com/idemgen/idemgen/runtime/idemproto/testpb",
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	require.NoError(t, err)
	return dir
}

func loadGroups(t *testing.T) []*group {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root(t), "testdata", "matrix", "*.txtar"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	var out []*group
	names := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		g := &group{name: strings.TrimSuffix(filepath.Base(p), ".txtar"), path: p, ar: txtar.Parse(b)}
		for _, f := range g.ar.Files {
			switch f.Name {
			case "decls.go":
				g.decls = f.Data
			case "cases":
				for i, line := range strings.Split(string(f.Data), "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					fs := strings.Fields(line)
					require.GreaterOrEqual(t, len(fs), 4, "%s: cases line %d: want SIDE ok|no NAME TYPE", g.name, i+1)
					c := matrixCase{group: g.name, side: fs[0], ok: fs[1] == "ok", name: fs[2], typ: strings.Join(fs[3:], " ")}
					require.Contains(t, []string{"req", "resp"}, c.side, "%s: %s", g.name, line)
					require.Contains(t, []string{"ok", "no"}, fs[1], "%s: %s", g.name, line)
					require.False(t, names[c.name], "case name %s used twice", c.name)
					names[c.name] = true
					g.cases = append(g.cases, c)
				}
			}
		}
		out = append(out, g)
	}
	return out
}

// casesFile declares each case's alias and annotated method.
func casesFile(g *group, only func(matrixCase) bool) []byte {
	var b strings.Builder
	imports := map[string]bool{"context": true, "github.com/jackc/pgx/v5": true}
	var body strings.Builder
	for _, c := range g.cases {
		if !only(c) {
			continue
		}
		for prefix, path := range knownImports {
			if strings.Contains(c.typ, prefix) {
				imports[path] = true
			}
		}
		fmt.Fprintf(&body, "\n// %s is a matrix case.\ntype %s = %s\n", c.name, c.name, c.typ)
		if c.side == "resp" {
			fmt.Fprintf(&body, "\n// Do%s returns the value the test set.\n//\n//go:generate idemgen -tests=false\nfunc (s *Svc) Do%s(ctx context.Context, tx pgx.Tx, n int) (%s, error) {\n\tv, _ := s.Out.Load(%q)\n\treturn v.(%s), nil\n}\n", c.name, c.name, c.name, c.name, c.name)
		} else {
			fmt.Fprintf(&body, "\n// Do%s takes the case as its request.\n//\n//go:generate idemgen -tests=false\nfunc (s *Svc) Do%s(ctx context.Context, tx pgx.Tx, in%s %s) error {\n\treturn nil\n}\n", c.name, c.name, c.name, c.name)
		}
	}
	paths := make([]string, 0, len(imports))
	for p := range imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b.WriteString("package m\n\nimport (\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n")
	b.WriteString(body.String())
	return []byte(b.String())
}

const svcFile = `package m

import "sync"

// Svc holds, per response case, the value the next call returns.
type Svc struct{ Out sync.Map }
`

// writeModule writes a module holding package m with the groups' cases
// chosen by only, and returns its directory.
func writeModule(t *testing.T, dir string, groups []*group, only func(matrixCase) bool) {
	t.Helper()
	gomod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	mod := strings.Replace(string(gomod), "module github.com/idemgen/idemgen/internal/matrix", "module example.com/matrix", 1)
	mod = strings.ReplaceAll(mod, "=> ../..", "=> "+root(t)) // the repository and its nested modules
	files := map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "m/svc.go": []byte(svcFile)}
	for _, g := range groups {
		decls := g.decls
		if len(decls) == 0 {
			decls = []byte("package m\n")
		}
		files["m/"+g.name+"_decls.go"] = decls
		files["m/"+g.name+".go"] = casesFile(g, only)
	}
	for n, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
}

var caseRE = regexp.MustCompile(`(?:the response |cannot fingerprint in)([A-Z][A-Za-z0-9]*)`)

// TestMatrix generates every case of testdata/matrix. Refused cases must
// be refused with the golden, positioned messages; accepted cases are
// generated together in one module that must build, vet and pass the
// property tests (matrix_test.go.txt) against a real PostgreSQL.
func TestMatrix(t *testing.T) {
	groups := loadGroups(t)
	ctx := context.Background()

	// 1. Everything together: the refusals, compared per group.
	all := t.TempDir()
	writeModule(t, all, groups, func(matrixCase) bool { return true })
	_, err := gen.Generate(ctx, gen.Config{Dir: all, Patterns: []string{"./..."}, Force: true})
	var list gen.ErrorList
	require.True(t, errors.As(err, &list), "Generate: %v", err)
	perGroup := map[string][]string{}
	refused := map[string]bool{}
	for _, e := range list.Relative(all) {
		file := filepath.Base(e.Pos.Filename)
		g := strings.TrimSuffix(strings.TrimSuffix(file, ".go"), "_decls")
		perGroup[g] = append(perGroup[g], e.Error())
		for _, m := range caseRE.FindAllStringSubmatch(e.Msg, -1) {
			refused[m[1]] = true
		}
	}
	for _, g := range groups {
		got := strings.Join(perGroup[g.name], "\n")
		if got != "" {
			got += "\n"
		}
		if *update {
			setSection(g.ar, "stderr", got)
			require.NoError(t, os.WriteFile(g.path, txtar.Format(g.ar), 0o644))
			continue
		}
		require.Equal(t, section(g.ar, "stderr"), got, "%s: refusals differ (go test -update to accept)", g.name)
		for _, c := range g.cases {
			require.Equal(t, !c.ok, refused[c.name], "%s: case %s (%s %s) refused=%v, want %v", g.name, c.name, c.side, c.typ, refused[c.name], !c.ok)
		}
	}

	// 2. The accepted cases alone: generated, built, vetted, tested.
	ok := t.TempDir()
	writeModule(t, ok, groups, func(c matrixCase) bool { return c.ok })
	out, err := gen.Generate(ctx, gen.Config{Dir: ok, Patterns: []string{"./..."}, Force: true})
	require.NoError(t, err)
	for p, b := range out.Files {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	support, err := os.ReadFile("support/support.go")
	require.NoError(t, err)
	support = []byte(strings.Replace(string(support), "package support", "package m", 1))
	require.NoError(t, os.WriteFile(filepath.Join(ok, "m", "support_test.go"), support, 0o644))
	wrappers, err := os.ReadFile(filepath.Join(ok, "m", gen.GoFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ok, "m", "matrix_test.go"), propertyTests(groups, string(wrappers)), 0o644))
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./m", "-args", "-rapid.checks=" + checks}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = ok
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), b)
	}
	if *update {
		require.NoError(t, writeREADME(filepath.Join(root(t), "docs", "types.md"), groups))
	}
	readme, err := os.ReadFile(filepath.Join(root(t), "docs", "types.md"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), table(groups)), "the supported-types table of docs/types.md is stale (go test -update in internal/matrix)")
}

func section(ar *txtar.Archive, name string) string {
	for _, f := range ar.Files {
		if f.Name == name {
			return string(f.Data)
		}
	}
	return ""
}

func setSection(ar *txtar.Archive, name, data string) {
	for i, f := range ar.Files {
		if f.Name == name {
			if data == "" {
				ar.Files = append(ar.Files[:i], ar.Files[i+1:]...)
				return
			}
			ar.Files[i].Data = []byte(data)
			return
		}
	}
	if data != "" {
		ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(data)})
	}
}

// The sentences of a wrapper's doc comment on nil and empty (gen's notes).
const (
	docNilDiffers = "A nil slice or map differs from an empty one"
	docEmptyIsNil = "Empty counts as nil (idem:\",emptyisnil\")"
)

// docOf returns the doc comment above the line of src that starts with decl.
func docOf(src, decl string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, decl) {
			continue
		}
		j := i
		for j > 0 && strings.HasPrefix(lines[j-1], "//") {
			j--
		}
		return strings.Join(lines[j:i], "\n")
	}
	return ""
}

// propertyTests writes, per accepted case, a rapid property: responses
// replay deep-equal to the first answer; requests fingerprint equal exactly
// when they are the same request, whatever order their maps were built in,
// and a request with its nil slices and maps made empty fingerprints as the
// wrapper's doc comment (in wrappers, the generated file) says.
func propertyTests(groups []*group, wrappers string) []byte {
	var b strings.Builder
	b.WriteString(`package m

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// replays: a replay equals the first answer (proto.Equal for a message).
func replays[R any](t *testing.T, svc *Svc, name string, call func(ctx context.Context) (R, error)) {
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		v := Draw[R](rt)
		svc.Out.Store(name, v)
		ctx := idem.ContextWithKey(context.Background(), fmt.Sprintf("%s-%d", t.Name(), n))
		first, err := call(ctx)
		if err != nil {
			rt.Fatalf("first call: %v", err)
		}
		svc.Out.Store(name, Draw[R](rt)) // a re-run would answer this
		again, err := call(ctx)
		if err != nil {
			rt.Fatalf("replay: %v", err)
		}
		if !Equal(first, again) {
			rt.Fatalf("replay differs from the first answer:\nfirst  %#v\nreplay %#v", first, again)
		}
	})
}

func fingerprints[Q any](t *testing.T, fp func(Q) []byte, docDiffers, docEmptyIsNil bool) {
	differs, tagged := NilDiffers[Q]()
	if docDiffers != differs || docEmptyIsNil != tagged {
		t.Fatalf("the doc comment says nil differs from empty: %v, some field is emptyisnil: %v; the type says %v, %v", docDiffers, docEmptyIsNil, differs, tagged)
	}
	rapid.Check(t, func(rt *rapid.T) {
		a, b := Draw[Q](rt), Draw[Q](rt)
		if !bytes.Equal(fp(a), fp(Copy(a))) {
			rt.Fatalf("a copy (maps built in another order) fingerprints differently: %#v", a)
		}
		if Same(a, b) != bytes.Equal(fp(a), fp(b)) {
			rt.Fatalf("same request = %v, but equal fingerprints = %v:\n%#v\n%#v", Same(a, b), !Same(a, b), a, b)
		}
		e := Emptied(a) // the retry that sends [] or {} where a sent nothing
		if Same(a, e) != bytes.Equal(fp(a), fp(e)) {
			rt.Fatalf("nil and empty: the same request as documented = %v, but equal fingerprints = %v:\n%#v\n%#v", Same(a, e), !Same(a, e), a, e)
		}
		if !docDiffers && !bytes.Equal(fp(a), fp(e)) {
			rt.Fatalf("the doc comment says nothing of nil and empty, but making them empty changes the fingerprint:\n%#v\n%#v", a, e)
		}
	})
}

func TestMatrix(t *testing.T) {
	db := idemtest.New(t)
	store, err := idem.NewStore(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	svc := &Svc{}
	w := NewIdempotentSvc(svc, store)
	_ = w
`)
	for _, g := range groups {
		for _, c := range g.cases {
			if !c.ok {
				continue
			}
			if c.side == "resp" {
				fmt.Fprintf(&b, "\tt.Run(%q, func(t *testing.T) { replays(t, svc, %q, func(ctx context.Context) (%s, error) { return w.Do%s(ctx, 1) }) })\n", c.group+"/"+c.name, c.name, c.name, c.name)
			} else {
				doc := docOf(wrappers, "func (w *IdempotentSvc) Do"+c.name+"(")
				fmt.Fprintf(&b, "\tt.Run(%q, func(t *testing.T) { fingerprints(t, fingerprintSvcDo%s, %t, %t) })\n", c.group+"/"+c.name, c.name,
					strings.Contains(doc, docNilDiffers), strings.Contains(doc, docEmptyIsNil))
			}
		}
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

const (
	beginMark = "<!-- type matrix: begin (generated by internal/matrix, go test -update) -->"
	endMark   = "<!-- type matrix: end -->"
)

// table renders the matrix as docs/types.md lists it.
func table(groups []*group) string {
	var b strings.Builder
	b.WriteString(beginMark + "\n\n| group | side | type | |\n| --- | --- | --- | --- |\n")
	for _, g := range groups {
		for _, c := range g.cases {
			verdict := "supported"
			if !c.ok {
				verdict = "refused at generate time"
			}
			side := map[string]string{"req": "request", "resp": "response"}[c.side]
			code := "`" + c.typ + "`"
			if strings.Contains(c.typ, "`") {
				code = "`` " + c.typ + " ``"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.name, side, strings.ReplaceAll(code, "|", `\|`), verdict)
		}
	}
	b.WriteString("\n" + endMark)
	return b.String()
}

func writeREADME(path string, groups []*group) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section", path, beginMark, endMark)
	}
	s = s[:i] + table(groups) + s[j+len(endMark):]
	return os.WriteFile(path, []byte(s), 0o644)
}
