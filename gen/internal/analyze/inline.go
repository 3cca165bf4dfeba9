package analyze

import (
	"fmt"
	"go/types"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// inlineLookupSig is the lookup's signature as a sentence; tx is the
// transaction type as source spells it.
func inlineLookupSig(recv, name, tx, result string) string {
	return fmt.Sprintf("func (%s) %s(ctx context.Context, tx %s, k idem.InlineKey) (%s, []byte, error)", recv, name, tx, result)
}

// noRows is the error a lookup wraps when no row holds the key, by the
// transaction kind it reads in.
func noRows(k ir.Tx) string {
	if k == ir.TxSQL {
		return "sql.ErrNoRows"
	}
	return "pgx.ErrNoRows"
}

// inline checks the inline-mode flags of a method and fills m.Inline. It
// reports every problem at its position and returns false if there was one.
func (b *builder) inline(d *directive.Directive, m *ir.Method, recv *types.Named, sig *types.Signature) bool {
	ok := true
	if d.Inline == "" {
		b.e.Add(d.Pos, "-lookup=%s is for inline mode: add -inline=TABLE naming the business table whose rows carry the key", d.Lookup)
		return false
	}
	schema, err := ledger.NewInline(d.Inline)
	if err != nil {
		b.e.Add(d.Pos, "-inline: %v", err)
		ok = false
	} else if b.model.Distributed != "" {
		// The setting was validated when the directive was parsed.
		if c, err := ledger.ParseCitus(b.model.Distributed); err == nil {
			if err := c.CheckInline(schema); err != nil {
				b.e.Add(d.Pos, "-inline=%s: %v", d.Inline, err)
				ok = false
			}
		}
	}
	if m.Tx == ir.TxNone {
		b.e.Add(d.Pos, "-inline needs a transaction, pgx.Tx or *sql.Tx, as the second parameter of %s: its own INSERT, in that transaction, is the claim", m.Key)
		ok = false
	}
	if d.Mode != "" {
		b.e.Add(d.Pos, "-mode does not apply with -inline: inline mode is its own mode; remove -mode")
		ok = false
	}
	if len(d.FinalErrors) > 0 {
		b.e.Add(d.Pos, "-final-errors does not apply with -inline: a failed request writes no row, so there is nothing to replay an error from; use the ledger (drop -inline) to replay final errors")
		ok = false
	}
	res := sig.Results()
	if res.Len() != 2 {
		b.e.Add(d.Pos, "-inline needs %s to return (R, error): a retry is answered by the lookup from the row the first request wrote, "+
			"so return what it wrote (the row, or its id) for the lookup to read back; a method that returns only an error keeps its key in the ledger (drop -inline and -lookup)", m.Key)
		return false
	}
	recvName := "s *" + recv.Obj().Name()
	result := types.TypeString(res.At(0).Type(), types.RelativeTo(b.pkg))
	lk := m.Tx
	if lk == ir.TxNone { // reported above; check the lookup as pgx's
		lk = ir.TxPgx
	}
	tx := txSource(lk)
	want := inlineLookupSig(recvName, d.Lookup, tx, result)
	if d.Lookup == "" {
		b.e.Add(d.Pos, "-inline needs -lookup=METHOD, a method of %s that reads the row stored under a key:\n\t%s", recv.Obj().Name(), inlineLookupSig(recvName, m.Name+"ByKey", tx, result))
		return false
	}
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(recv), true, b.pkg, d.Lookup)
	fn, isFunc := obj.(*types.Func)
	if !isFunc {
		b.e.Add(d.Pos, "-lookup=%s: %s has no method %s; add\n\t%s\nwhich returns the row stored under k.Scope and k.Key, the fingerprint written with it, and an error wrapping %s when there is none", d.Lookup, recv.Obj().Name(), d.Lookup, want, noRows(lk))
		return false
	}
	pos := b.l.Pkg.Fset.Position(fn.Pos())
	ls := fn.Type().(*types.Signature)
	p, r := ls.Params(), ls.Results()
	var problems []string
	if p.Len() != 3 || !isNamed(p.At(0).Type(), "context", "Context") || txKind(p.At(1).Type()) != lk || !isNamed(p.At(2).Type(), ir.IdemPath, "InlineKey") {
		problems = append(problems, fmt.Sprintf("its parameters must be (ctx context.Context, tx %s, k idem.InlineKey)", tx))
	}
	if r.Len() != 3 || !isError(r.At(2).Type()) {
		problems = append(problems, fmt.Sprintf("it must return (%s, []byte, error)", result))
	} else {
		if !types.Identical(r.At(0).Type(), res.At(0).Type()) {
			problems = append(problems, fmt.Sprintf("its first result is %s, but %s returns %s: a replay must be the type the first answer was",
				types.TypeString(r.At(0).Type(), types.RelativeTo(b.pkg)), m.Key, result))
		}
		if s, isSlice := r.At(1).Type().Underlying().(*types.Slice); !isSlice || !types.Identical(s.Elem(), types.Typ[types.Byte]) {
			problems = append(problems, fmt.Sprintf("its second result is %s, want []byte: the fingerprint stored in %s", types.TypeString(r.At(1).Type(), types.RelativeTo(b.pkg)), ledger.InlineFingerprintColumn))
		}
	}
	if len(problems) > 0 {
		b.e.Add(pos, "%s is the lookup of %s (-lookup=%s), but %s; want\n\t%s", d.Lookup, m.Key, d.Lookup, strings.Join(problems, "; "), want)
		ok = false
	}
	if !ok {
		return false
	}
	m.Mode = ir.ModeInline
	m.Inline = &ir.Inline{
		Table: schema.Table.String(), TableQuoted: schema.Table.Quoted(),
		KeyColumn: schema.Table.String() + "." + ledger.InlineKeyColumn,
		Index:     schema.IndexName(), Lookup: d.Lookup, DDL: schema.DDL(),
	}
	return true
}

// checkInlineTables refuses two inline methods on one table: the table's
// keys are one namespace, swept with one retention.
func (b *builder) checkInlineTables(recvs []*ir.Receiver) {
	by := map[string][]*ir.Method{}
	for _, r := range recvs {
		for _, m := range r.Methods {
			if m.Inline != nil {
				by[m.Inline.Table] = append(by[m.Inline.Table], m)
			}
		}
	}
	tables := make([]string, 0, len(by))
	for t := range by {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		list := by[t]
		for _, m := range list[1:] {
			b.e.Add(posOf(m.Pos), "%s and %s both keep their keys in %s (-inline=%s): a table holds the keys of one method; give one of them its own table or the ledger", list[0].Key, m.Key, t, t)
		}
	}
}
