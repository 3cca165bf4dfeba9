package effectwalk

import (
	"fmt"
	"go/types"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// sqlLibraries are the packages (and those below them) that send SQL on
// a handle they are given: the drivers and database/sql, the ORMs and
// query builders. They are not walked into (a statement's handle is
// judged where the user's code hands it over), and their statement calls
// are judged by the handle's provenance.
var sqlLibraries = []string{
	"database/sql",
	"github.com/jackc/pgx",
	"github.com/lib/pq",
	"github.com/uptrace/bun",
	"gorm.io/gorm",
	"gorm.io/driver",
	"github.com/jmoiron/sqlx",
	"github.com/Masterminds/squirrel",
	"github.com/georgysavva/scany",
}

func sqlLibrary(path string) bool { return under(path, sqlLibraries) }

func under(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// statementNames are, per library, the functions and methods that send a
// statement (or begin a transaction of their own) on the handle they are
// called on or given; builders (NewSelect, Where, Model, sq.Update) are
// not.
var statementNames = map[string][]string{
	"database/sql":                    {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Begin", "BeginTx", "Prepare", "PrepareContext"},
	"github.com/jackc/pgx":            {"Exec", "Query", "QueryRow", "SendBatch", "CopyFrom", "Begin", "BeginTx", "Prepare"},
	"github.com/uptrace/bun":          {"Exec", "Scan", "Count", "ScanAndCount", "Exists", "ExecContext", "QueryContext", "QueryRowContext", "Query", "QueryRow", "Begin", "BeginTx", "RunInTx"},
	"gorm.io/gorm":                    {"Create", "CreateInBatches", "Save", "First", "Take", "Last", "Find", "FindInBatches", "FirstOrInit", "FirstOrCreate", "Update", "Updates", "UpdateColumn", "UpdateColumns", "Delete", "Count", "Row", "Rows", "Scan", "Pluck", "Exec", "Transaction", "Begin"},
	"github.com/jmoiron/sqlx":         {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Queryx", "QueryxContext", "QueryRowx", "QueryRowxContext", "Get", "GetContext", "Select", "SelectContext", "NamedExec", "NamedExecContext", "NamedQuery", "NamedQueryContext", "MustExec", "MustExecContext", "Begin", "BeginTx", "Beginx", "BeginTxx", "MustBegin", "MustBeginTx"},
	"github.com/Masterminds/squirrel": {"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Scan", "ScanContext"},
	"github.com/georgysavva/scany":    {"Select", "Get"},
}

// builderFuncs are package functions of the libraries above that start a
// builder from nothing (squirrel's sq.Update): never statements.
func statementCall(pkg, name string) bool {
	for lib, names := range statementNames {
		if pkg != lib && !strings.HasPrefix(pkg, lib+"/") {
			continue
		}
		for _, n := range names {
			if n == name {
				return true
			}
		}
	}
	return false
}

// handleInterfaceCall reports a call of a statement method on an
// interface declared outside the SQL libraries (sqlc's DBTX, a service's
// own "querier"): one named like a pgx or database/sql statement method
// whose results include a pgx, pgconn or database/sql type.
func handleInterfaceCall(m *types.Func) bool {
	name := m.Name()
	found := false
	for _, n := range append(append([]string{}, pgxCalls...), sqlCalls...) {
		if n == name {
			found = true
		}
	}
	if !found {
		return false
	}
	res := m.Type().(*types.Signature).Results()
	for i := 0; i < res.Len(); i++ {
		t := derefType(res.At(i).Type())
		if n := namedOf(t); n != nil && n.Obj().Pkg() != nil {
			p := n.Obj().Pkg().Path()
			if p == "database/sql" || under(p, []string{"github.com/jackc/pgx"}) {
				return true
			}
		}
	}
	return false
}

// statementInputs are the values whose provenance decides where a
// statement call runs: its receiver and arguments.
func statementInputs(c *ssa.CallCommon) []ssa.Value {
	var vs []ssa.Value
	if c.IsInvoke() {
		vs = append(vs, c.Value)
	}
	for _, a := range c.Args {
		if handleLike(a.Type()) && !isContext(a.Type()) {
			vs = append(vs, a)
		}
	}
	return vs
}

func isContext(t types.Type) bool {
	n := namedOf(t)
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}

// statementHandle is the value a statement is sent through, for its
// description: the receiver, or the first argument that can be a handle.
func statementHandle(c *ssa.CallCommon, static *ssa.Function) ssa.Value {
	if c.IsInvoke() {
		return c.Value
	}
	if static != nil && static.Signature.Recv() != nil && len(c.Args) > 0 {
		return c.Args[0]
	}
	for _, a := range c.Args {
		if handleLike(a.Type()) && !isContext(a.Type()) {
			return a
		}
	}
	return nil
}

// statement reports a call that sends a statement whose place (inside or
// outside the transaction) follows the handle's provenance, with the
// callee's name for messages.
func statement(c *ssa.CallCommon) (string, bool) {
	if c.IsInvoke() {
		named := namedOf(c.Value.Type())
		if named == nil || named.Obj().Pkg() == nil {
			return "", false
		}
		path := named.Obj().Pkg().Path()
		name := fmt.Sprintf("(%s.%s).%s", path, named.Obj().Name(), c.Method.Name())
		if sqlLibrary(path) {
			return name, statementCall(path, c.Method.Name())
		}
		return name, handleInterfaceCall(c.Method)
	}
	g := c.StaticCallee()
	if g == nil {
		return "", false
	}
	path := funcPkg(g)
	if !sqlLibrary(path) {
		return "", false
	}
	obj, ok := origin(g).Object().(*types.Func)
	if !ok {
		return "", false
	}
	return qualifiedName(obj), statementCall(path, obj.Name())
}

// qualifiedName names a function as messages do: (*database/sql.Tx).Exec,
// github.com/georgysavva/scany/v2/pgxscan.Select.
func qualifiedName(obj *types.Func) string {
	path := obj.Pkg().Path()
	sig := obj.Type().(*types.Signature)
	if sig.Recv() == nil {
		return path + "." + obj.Name()
	}
	rt := sig.Recv().Type()
	star := ""
	if p, ok := types.Unalias(rt).(*types.Pointer); ok {
		rt, star = p.Elem(), "*"
	}
	if n := namedOf(rt); n != nil {
		return fmt.Sprintf("(%s%s.%s).%s", star, path, n.Obj().Name(), obj.Name())
	}
	return path + "." + obj.Name()
}
