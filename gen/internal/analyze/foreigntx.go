package analyze

import (
	"go/token"
	"go/types"

	"github.com/idemgen/idemgen/gen/ir"
)

// foreignTx is another library's transaction or database handle: how
// messages name the library, the transaction to take instead (tx), and how
// to get that one, in one line (how).
type foreignTx struct{ lib, tx, how string }

// How a method reaches the transaction idemgen runs it in.
const (
	howSQL  = "the wrapper begins it on the store's *sql.DB, built by idem.NewSQLStore"
	howBun  = "a bun.Tx embeds it: tx.Tx; bun's queries run on it with .Conn(tx)"
	howSqlx = "a *sqlx.Tx embeds it: tx.Tx"
	howPgx  = "the wrapper begins it on the store's *pgxpool.Pool, built by idem.NewStore"
)

// foreignTxs are transaction types and handles of database libraries, by
// qualified name, that an atomic or inline method cannot take.
var foreignTxs = map[string]foreignTx{
	"database/sql.Tx":                      {"database/sql", "*sql.Tx", "a pointer: database/sql hands out *sql.Tx"},
	"database/sql.DB":                      {"database/sql", "*sql.Tx", howSQL},
	"database/sql.Conn":                    {"database/sql", "*sql.Tx", howSQL},
	"gorm.io/gorm.DB":                      {"GORM", "*sql.Tx", "a GORM transaction holds it: tx.Statement.ConnPool.(*sql.Tx), with PrepareStmt off"},
	"github.com/uptrace/bun.Tx":            {"bun", "*sql.Tx", howBun},
	"github.com/uptrace/bun.IDB":           {"bun", "*sql.Tx", howBun},
	"github.com/jmoiron/sqlx.Tx":           {"sqlx", "*sql.Tx", howSqlx},
	"github.com/jmoiron/sqlx.DB":           {"sqlx", "*sql.Tx", howSqlx},
	"github.com/jackc/pgx/v5.Conn":         {"pgx", "pgx.Tx", howPgx},
	"github.com/jackc/pgx/v5/pgxpool.Pool": {"pgx", "pgx.Tx", howPgx},
}

// foreignTx reports, in one line, a parameter that is another library's
// transaction or handle: it is not a request to fingerprint, and idemgen's
// atomic and inline modes take a transaction they begin themselves, a
// pgx.Tx or a *sql.Tx; the line says how to take one.
func (b *builder) foreignTx(pos token.Position, m *ir.Method, param types.Type, n int) bool {
	t := param
	if p, isPtr := types.Unalias(t).(*types.Pointer); isPtr {
		t = p.Elem()
	}
	named, isNamedT := types.Unalias(t).(*types.Named)
	if !isNamedT || named.Obj().Pkg() == nil {
		return false
	}
	f, found := foreignTxs[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
	if !found {
		return false
	}
	b.e.Add(pos, "%s takes a %s handle (%s) as parameter %d, which is not a transaction idemgen can run the method in: take tx %s right after ctx instead (%s), or drop the parameter for external mode",
		m.Key, f.lib, types.TypeString(param, b.qualifier), n, f.tx, f.how)
	return true
}
