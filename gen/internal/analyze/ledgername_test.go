package analyze

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/ir"
)

// TestCheckLedgerNames: a method whose ledger name would identify it badly
// is refused at its directive.
func TestCheckLedgerNames(t *testing.T) {
	pkg := func(path, recv string, pos string) *ir.Package {
		m := &ir.Method{Receiver: recv, Name: "Create", Key: recv + ".Create", Ledger: ledgerName(path, recv, "Create"), Pos: pos}
		return &ir.Package{Path: path, Name: filepath.Base(path), Receivers: []*ir.Receiver{{Name: recv, Methods: []*ir.Method{m}}}}
	}
	assert.Empty(t, CheckLedgerNames([]*ir.Package{pkg("example.com/m/users", "Service", "users.go:3:1"), pkg("example.com/m/orders", "Service", "orders.go:3:1")}))

	a, b := pkg("example.com/m/users", "Service", "users.go:3:1"), pkg("example.com/m/orders", "Service", "orders.go:3:1")
	b.Receivers[0].Methods[0].Ledger = a.Receivers[0].Methods[0].Ledger // as if the naming lost the path
	list := CheckLedgerNames([]*ir.Package{a, b})
	require.Len(t, list, 1)
	assert.Equal(t, `orders.go:3:1: Service.Create shares the ledger name "example.com/m/users.Service.Create" with the method at users.go:3:1: their keys would replay each other's responses; rename one`, list[0].Error())

	list = CheckLedgerNames([]*ir.Package{pkg("command-line-arguments", "Service", "users.go:3:1")})
	require.Len(t, list, 1)
	assert.Contains(t, list[0].Error(), "users.go:3:1: Service.Create: package command-line-arguments has no import path")

	long := "example.com/" + strings.Repeat("a", maxLedgerName)
	list = CheckLedgerNames([]*ir.Package{pkg(long, "Service", "users.go:3:1")})
	require.Len(t, list, 1)
	assert.Contains(t, list[0].Error(), "more than the 512 the ledger's index allows")
}
