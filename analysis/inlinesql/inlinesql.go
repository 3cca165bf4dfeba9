// Package inlinesql defines an Analyzer that reports an idemgen inline
// method whose SQL writes its table but never its key column.
package inlinesql

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemgen/idemgen/analysis/internal/annot"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

const doc = `report inline methods whose SQL never writes the key column

An idemgen method with -inline=TABLE keeps its idempotency key in its own
row: its INSERT into TABLE writes idem.InlineKeyFrom(ctx) into the
idempotency_scope, idempotency_key and idempotency_fingerprint columns, and
that INSERT is the claim. A method that writes TABLE without the key claims
nothing, and every call fails with idem.ErrKeyNotWritten. The check reads
the SQL the method runs where it is a constant: string constants passed to
Exec, Query, QueryRow, their Context forms and pgx's Batch.Queue, in the method, in the
functions of its package it calls, and in the functions of other packages
it calls (sqlc's generated queries), and reports the method when one of
them INSERTs into or UPDATEs TABLE and none of those writes names
idempotency_key. SQL it cannot read (built at run time, written by an ORM)
is not judged.`

// Analyzer reports inline methods whose readable SQL never writes the key.
var Analyzer = &analysis.Analyzer{
	Name:      "inlinesql",
	Doc:       doc,
	URL:       "https://pkg.go.dev/github.com/idemgen/idemgen/analysis/inlinesql",
	Run:       run,
	FactTypes: []analysis.Fact{new(Statements)},
}

// Statements is the fact exported on a function that runs constant SQL:
// the statements it passes to Exec, Query or QueryRow, its own and those of
// the functions it calls.
type Statements struct {
	// SQL are the statements, in the order first seen.
	SQL []string
}

// AFact marks Statements as an analysis.Fact.
func (*Statements) AFact() {}

// String summarises the fact for analysistest.
func (s *Statements) String() string { return fmt.Sprintf("%d SQL statements", len(s.SQL)) }

// sqlMethods are the methods whose string argument is SQL to run, in
// database/sql, pgx (a batch's Queue too) and the interfaces sqlc
// generates over them.
var sqlMethods = map[string]bool{
	"Exec": true, "ExecContext": true, "Query": true, "QueryContext": true,
	"QueryRow": true, "QueryRowContext": true, "Prepare": true, "PrepareContext": true,
	"Queue": true,
}

func run(pass *analysis.Pass) (any, error) {
	decls := map[*types.Func]*ast.FuncDecl{}
	var order []*types.Func // source order, for deterministic facts and reports
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					decls[fn] = fd
					order = append(order, fn)
				}
			}
		}
	}
	c := &collector{pass: pass, decls: decls, memo: map[*types.Func][]string{}}
	for _, fn := range order {
		if sql := c.of(fn); len(sql) > 0 {
			pass.ExportObjectFact(fn, &Statements{SQL: sql})
		}
	}
	for _, fn := range order {
		fd := decls[fn]
		d := annot.Of(fd)
		if d == nil {
			continue
		}
		table, ok := d.Inline()
		if !ok || table == "" {
			continue
		}
		check(pass, fd, table, c.of(fn))
	}
	return nil, nil
}

// collector gathers the constant SQL of the package's functions.
type collector struct {
	pass  *analysis.Pass
	decls map[*types.Func]*ast.FuncDecl
	memo  map[*types.Func][]string
}

// of returns the constant SQL fn runs, directly or through the functions it
// calls statically.
func (c *collector) of(fn *types.Func) []string {
	if sql, ok := c.memo[fn]; ok {
		return sql
	}
	c.memo[fn] = nil // a recursive call adds nothing new
	var sql []string
	add := func(s ...string) {
		for _, q := range s {
			if !slices.Contains(sql, q) {
				sql = append(sql, q)
			}
		}
	}
	ast.Inspect(c.decls[fn].Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		callee, _ := typeutilCallee(c.pass.TypesInfo, call).(*types.Func)
		if callee == nil {
			return true
		}
		if sqlMethods[callee.Name()] {
			for _, a := range call.Args {
				if tv, ok := c.pass.TypesInfo.Types[a]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
					add(constant.StringVal(tv.Value))
					break
				}
			}
			return true
		}
		callee = callee.Origin()
		if _, local := c.decls[callee]; local {
			add(c.of(callee)...)
			return true
		}
		var st Statements
		if c.pass.ImportObjectFact(callee, &st) {
			add(st.SQL...)
		}
		return true
	})
	c.memo[fn] = sql
	return sql
}

// typeutilCallee returns the function or method a call calls, or nil for a
// call of a function value, a conversion or a builtin.
func typeutilCallee(info *types.Info, call *ast.CallExpr) types.Object {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return info.Uses[f]
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[f]; ok {
			if sel.Kind() == types.MethodVal || sel.Kind() == types.MethodExpr {
				return sel.Obj()
			}
			return nil
		}
		return info.Uses[f.Sel]
	case *ast.IndexExpr:
		if id, ok := ast.Unparen(f.X).(*ast.Ident); ok {
			return info.Uses[id]
		}
	}
	return nil
}

var (
	comments = regexp.MustCompile(`(?s)--[^\n]*|/\*.*?\*/`)
	writes   = regexp.MustCompile(`(?i)\b(?:insert\s+into|update|merge\s+into)\s+((?:"[^"]+"|[\w$]+)(?:\s*\.\s*(?:"[^"]+"|[\w$]+))*)`)
	keyCol   = regexp.MustCompile(`(?i)(?:\b|")` + ledger.InlineKeyColumn + `(?:\b|")`)
)

// check reports fd when sql writes table and no write of it names the key
// column.
func check(pass *analysis.Pass, fd *ast.FuncDecl, table string, sql []string) {
	want := lastIdent(table)
	wrote, keyed := 0, false
	for _, q := range sql {
		q = comments.ReplaceAllString(q, " ")
		for _, m := range writes.FindAllStringSubmatch(q, -1) {
			if lastIdent(m[1]) != want {
				continue
			}
			wrote++
			if keyCol.MatchString(q) {
				keyed = true
			}
		}
	}
	if wrote == 0 || keyed {
		return
	}
	pass.Report(analysis.Diagnostic{
		Pos: fd.Name.Pos(), End: fd.Name.End(),
		Message: fmt.Sprintf("%s is inline (-inline=%s), but none of its SQL that writes %s sets %s.%s: that INSERT is the claim, so every call fails with idem.ErrKeyNotWritten; "+
			"write idem.InlineKeyFrom(ctx)'s Scope, Key and Fingerprint into %s, %s and %s in the INSERT",
			fd.Name.Name, table, table, table, ledger.InlineKeyColumn,
			ledger.InlineScopeColumn, ledger.InlineKeyColumn, ledger.InlineFingerprintColumn),
	})
}

// lastIdent returns the table name without its schema or quotes, folded as
// PostgreSQL folds unquoted names.
func lastIdent(name string) string {
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSpace(name)
	if strings.HasPrefix(name, `"`) {
		return strings.Trim(name, `"`)
	}
	return strings.ToLower(name)
}
