package golang

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// inlineMethod adds what an inline-mode method generates besides its
// compile-time guards (File puts those first): its description, the wrapper
// and its InTx form, the sweep and the fingerprint function.
func (e *Emitter) inlineMethod(f *jen.File, r *ir.Receiver, m *ir.Method) {
	f.Add(e.inlineMethodVar(m))
	f.Add(e.inlineWrapper(r, m, false))
	f.Add(e.inlineWrapper(r, m, true))
	f.Add(e.inlineSweep(r, m))
	f.Add(e.fingerprintFunc(m))
}

func inlineModeText(m *ir.Method) string {
	return fmt.Sprintf("Mode: inline: the key is stored in %s, with its scope and the request's fingerprint, by %s's own INSERT (idem.InlineKeyFrom(ctx)); that INSERT is the claim, under the unique index %s. A retry is answered by %s from the row.",
		m.Inline.KeyColumn, m.Name, m.Inline.Index, m.Inline.Lookup)
}

func inlineRetentionText(m *ir.Method) string {
	return retentionText(m) + fmt.Sprintf(" Rows are never deleted: after the window the key is taken off its row (%s).", names.Sweep(m.Name))
}

const inlineFinalText = "No stored errors: a failed request writes no row, so any error lets a retry run the method again."

// inlineMethodVar:
//
//	var idemShopCreateOrder = &idem.InlineMethod[Order]{Name: "Shop.CreateOrder", Table: "orders", Retention: 48 * time.Hour}
func (e *Emitter) inlineMethodVar(m *ir.Method) jen.Code {
	d := []jen.Code{jen.Id("Name").Op(":").Lit(m.Ledger), jen.Id("Table").Op(":").Lit(m.Inline.Table)}
	if m.Retention > 0 {
		d = append(d, jen.Id("Retention").Op(":").Add(duration(m.Retention)))
	}
	return Comment(
		fmt.Sprintf("%s describes %s to the runtime; its promises are in %s's doc comment.", e.names.MethodVar(m), m.Key, m.Name),
	).Line().Var().Id(e.names.MethodVar(m)).Op("=").Op("&").Qual(ir.IdemPath, "InlineMethod").Types(e.Result(m)).
		Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, d...).Line()
}

// inlineWrapper:
//
//	func (w *IdempotentShop) CreateOrder(ctx context.Context, req OrderRequest) (Order, error) {
//		return idem.Inline(ctx, w.store, idemShopCreateOrder, fingerprintShopCreateOrder(req), w.inner.OrderByKey,
//			func(ctx context.Context, tx pgx.Tx) (Order, error) { return w.inner.CreateOrder(ctx, tx, req) })
//	}
func (e *Emitter) inlineWrapper(r *ir.Receiver, m *ir.Method, inTx bool) jen.Code {
	name, fn := m.Name, entry(m, inTx)
	params := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	coreArgs := []jen.Code{jen.Id("ctx"), jen.Id("w").Dot("store")}
	if inTx {
		name = names.InTx(m.Name)
		params = append(params, jen.Id("tx").Add(TxType(m)))
		coreArgs = append(coreArgs, jen.Id("tx"))
	}
	var args []jen.Code
	callArgs := []jen.Code{jen.Id("ctx"), jen.Id("tx")}
	for _, p := range m.Params {
		params = append(params, jen.Id(p.Local).Add(e.Type(p.Type)))
		args = append(args, jen.Id(p.Local))
		callArgs = append(callArgs, jen.Id(p.Local))
	}
	coreArgs = append(coreArgs, jen.Id(e.names.MethodVar(m)), jen.Id(e.names.Fingerprint(m)).Call(args...), jen.Id("w").Dot("inner").Dot(m.Inline.Lookup),
		jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Add(TxType(m))).Params(e.Result(m), jen.Error()).Block(
			jen.Return(jen.Id("w").Dot("inner").Dot(m.Name).Call(callArgs...))))
	doc := []string{
		fmt.Sprintf("%s is %s run inside the caller's transaction tx, under a savepoint: the row commits with", name, m.Name),
		"tx, and a refused claim (replay, mismatch) rolls back to the savepoint and leaves tx usable.",
		fmt.Sprintf("Keys, retention and fingerprint are %s's.", m.Name),
	}
	if !inTx {
		doc = []string{fmt.Sprintf("%s calls %s at most once per idempotency key (idem.ContextWithKey) within its scope", name, m.Key),
			fmt.Sprintf("(idem.ContextWithScope); a retry with the same key and request replays the row (%s), and the same key", m.Inline.Lookup),
			fmt.Sprintf("with another request fails with idem.ErrMismatch. %s must write its key: if it returns without", m.Name),
			"having done so, everything rolls back and the call fails with idem.ErrKeyNotWritten.",
			inlineModeText(m), inlineRetentionText(m), inlineFinalText, fingerprintText(m)}
		doc = append(doc, effectsText(m)...)
	}
	return Comment(doc...).Line().Func().Params(jen.Id("w").Op("*").Id(names.Wrapper(r.Name))).Id(name).Params(params...).
		Params(e.Type(m.Result), jen.Error()).Block(jen.Return(jen.Qual(ir.IdemPath, fn).Call(coreArgs...))).Line()
}

// inlineSweep:
//
//	func (w *IdempotentShop) SweepCreateOrderKeys(ctx context.Context, batch int) (int64, error) {
//		return idem.SweepInline(ctx, w.store, idemShopCreateOrder, batch)
//	}
func (e *Emitter) inlineSweep(r *ir.Receiver, m *ir.Method) jen.Code {
	name := names.Sweep(m.Name)
	return Comment(
		fmt.Sprintf("%s takes the keys of %s whose retention window has ended off their rows in %s,", name, m.Key, m.Inline.Table),
		"in batches of batch rows (idem.DefaultSweepBatch if batch <= 0), skipping rows a transaction holds; the",
		"rows stay. Run it periodically. It returns how many keys it cleared.",
	).Line().Func().Params(jen.Id("w").Op("*").Id(names.Wrapper(r.Name))).Id(name).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("batch").Int()).
		Params(jen.Int64(), jen.Error()).Block(
		jen.Return(jen.Qual(ir.IdemPath, "SweepInline").Call(jen.Id("ctx"), jen.Id("w").Dot("store"), jen.Id(e.names.MethodVar(m)), jen.Id("batch"))),
	).Line()
}

// inlineGuard: as guard, for the method and its lookup.
//
//	type runGoGenerateShopCreateOrder func(*Shop, context.Context, pgx.Tx, OrderRequest) (Order, error)
//	type runGoGenerateShopOrderByKey func(*Shop, context.Context, pgx.Tx, idem.InlineKey) (Order, []byte, error)
//	var _ runGoGenerateShopCreateOrder = (*Shop).CreateOrder
//	var _ runGoGenerateShopOrderByKey = (*Shop).OrderByKey
func (e *Emitter) inlineGuard(m *ir.Method) jen.Code {
	params := []jen.Code{jen.Op("*").Id(m.Receiver), jen.Qual("context", "Context"), TxType(m)}
	for _, p := range m.Params {
		params = append(params, e.Type(p.Type))
	}
	return jen.Add(
		Comment(fmt.Sprintf("%s and %s are the signatures of %s and its lookup %s this file was", e.names.Guard(m), e.names.LookupGuard(m), m.Key, m.Inline.Lookup),
			"generated from. The build fails below, naming the type, if either changes: run go generate.").Line(),
		jen.Type().Defs(
			jen.Id(e.names.Guard(m)).Func().Params(params...).Params(e.Type(m.Result), jen.Error()),
			jen.Id(e.names.LookupGuard(m)).Func().Params(jen.Op("*").Id(m.Receiver), jen.Qual("context", "Context"), TxType(m), jen.Qual(ir.IdemPath, "InlineKey")).
				Params(e.Type(m.Result), jen.Index().Byte(), jen.Error()),
		).Line().Line(),
		jen.Var().Defs(
			jen.Id("_").Id(e.names.Guard(m)).Op("=").Parens(jen.Op("*").Id(m.Receiver)).Dot(m.Name),
			jen.Id("_").Id(e.names.LookupGuard(m)).Op("=").Parens(jen.Op("*").Id(m.Receiver)).Dot(m.Inline.Lookup),
		).Line(),
	)
}
