package golang

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
)

// entry is the runtime function that runs m's wrapper, by mode, in the
// caller's transaction when inTx: the same function whether m takes a
// pgx.Tx or a *sql.Tx (the body's type picks the runtime's driver).
func entry(m *ir.Method, inTx bool) string {
	switch {
	case m.Mode == ir.ModeInline && inTx:
		return "InlineInTx"
	case m.Mode == ir.ModeInline:
		return "Inline"
	case inTx:
		return "AtomicInTx"
	case m.Mode == ir.ModeAtomic:
		return "Atomic"
	}
	return "External"
}

// duration renders a duration literal: 48 * time.Hour.
func duration(d time.Duration) jen.Code {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"}, {time.Millisecond, "Millisecond"}} {
		if d%u.d == 0 {
			if d == u.d {
				return jen.Qual("time", u.name)
			}
			return jen.Lit(int(d/u.d)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Lit(int64(d)))
}

// wrapperType:
//
//	type IdempotentPayments struct { inner *Payments; store *idem.Store }
func (e *Emitter) wrapperType(r *ir.Receiver) jen.Code {
	var list []string
	for _, m := range r.Methods {
		list = append(list, m.Name)
	}
	return Comment(
		fmt.Sprintf("%s wraps *%s: each of its methods (%s) runs at most once per idempotency key", names.Wrapper(r.Name), r.Name, strings.Join(list, ", ")),
		"(idem.ContextWithKey) within its scope (idem.ContextWithScope), and retries replay the stored response.",
	).Line().Type().Id(names.Wrapper(r.Name)).Struct(
		jen.Id("inner").Op("*").Id(r.Name),
		jen.Id("store").Op("*").Qual(ir.IdemPath, "Store"),
	).Line()
}

// constructor:
//
//	func NewIdempotentPayments(inner *Payments, store *idem.Store) *IdempotentPayments
//
// It registers each inline method with the store's janitor (idem.RegisterInline),
// so one StartJanitor sweeps the ledger and every inline table.
func (e *Emitter) constructor(r *ir.Receiver) jen.Code {
	doc := []string{fmt.Sprintf("%s wraps inner so that its annotated methods run through the ledger of store.", names.Constructor(r.Name))}
	if r.Tx == ir.TxSQL {
		doc = append(doc, "Its methods take a *sql.Tx: store must come from idem.NewSQLStore, over the *sql.DB they run on.")
	}
	var body []jen.Code
	var inline []string
	for _, m := range r.Methods {
		if m.Mode == ir.ModeInline {
			body = append(body, jen.Qual(ir.IdemPath, "RegisterInline").Call(jen.Id("store"), jen.Id(e.names.MethodVar(m))))
			inline = append(inline, m.Name)
		}
	}
	if len(inline) > 0 {
		doc = append(doc, fmt.Sprintf("It registers the inline keys of %s with store's janitor (idem.RegisterInline), so", strings.Join(inline, ", ")),
			"store.StartJanitor takes their expired keys off their rows too.")
	}
	body = append(body, jen.Return(jen.Op("&").Id(names.Wrapper(r.Name)).Values(jen.Dict{jen.Id("inner"): jen.Id("inner"), jen.Id("store"): jen.Id("store")})))
	return Comment(doc...).Line().
		Func().Id(names.Constructor(r.Name)).Params(jen.Id("inner").Op("*").Id(r.Name), jen.Id("store").Op("*").Qual(ir.IdemPath, "Store")).Op("*").Id(names.Wrapper(r.Name)).Block(body...).Line()
}

// methodVar:
//
//	var idemPaymentsCharge = &idem.Method[Receipt]{Name: "example.com/shop.Payments.Charge", Retention: 48 * time.Hour, ...}
func (e *Emitter) methodVar(m *ir.Method) jen.Code {
	// Fields in the order a reader expects, not jen.Dict's sorted order.
	d := []jen.Code{jen.Id("Name").Op(":").Lit(m.Ledger)}
	if m.Retention > 0 {
		d = append(d, jen.Id("Retention").Op(":").Add(duration(m.Retention)))
	}
	if m.LockTimeout > 0 {
		d = append(d, jen.Id("LockTimeout").Op(":").Add(duration(m.LockTimeout)))
	}
	if proto := protoResult(m); proto {
		// The response is stored in protobuf's binary form.
		d = append(d, jen.Id("Encode").Op(":").Qual(ir.IdemprotoPath, "Encode").Types(e.Type(m.Result)),
			jen.Id("Decode").Op(":").Qual(ir.IdemprotoPath, "Decode").Types(e.Type(m.Result)))
	}
	if len(m.FinalErrors) > 0 {
		var items []jen.Code
		for _, n := range m.FinalErrors {
			items = append(items, jen.Values(jen.Id("Name").Op(":").Lit(n), jen.Id("Err").Op(":").Id(n)))
		}
		d = append(d, jen.Id("FinalErrors").Op(":").Index().Qual(ir.IdemPath, "FinalError").Values(items...))
	}
	stored := "The response is stored as JSON; every caller, the first included, gets it\ndecoded from the stored bytes, so a replay equals the first answer."
	if protoResult(m) {
		stored = "The response is stored in protobuf's deterministic binary form (idemproto.Encode);\nevery caller, the first included, gets it decoded from the stored bytes, so a\nreplay is proto.Equal to the first answer."
	}
	return Comment(
		fmt.Sprintf("%s describes %s to the runtime; its promises are in %s's doc comment.\n%s", e.names.MethodVar(m), m.Key, m.Name, stored),
		"Name, the method's identity in the ledger, holds the package's import path:\nrenaming or moving the package, the type or the method orphans its stored keys.",
	).Line().Var().Id(e.names.MethodVar(m)).Op("=").Op("&").Qual(ir.IdemPath, "Method").Types(e.Result(m)).
		Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}, d...).Line()
}

// protoResult reports whether m returns a protobuf message, which its
// method description stores with idemproto.
func protoResult(m *ir.Method) bool { return m.Result != nil && m.Result.Proto }

// wrapperMethod:
//
//	func (w *IdempotentPayments) Charge(ctx context.Context, req ChargeRequest) (Receipt, error) {
//		return idem.Atomic(ctx, w.store, idemPaymentsCharge, fingerprintPaymentsCharge(req),
//			func(ctx context.Context, tx pgx.Tx) (Receipt, error) { return w.inner.Charge(ctx, tx, req) })
//	}
func (e *Emitter) wrapperMethod(r *ir.Receiver, m *ir.Method, inTx bool) jen.Code {
	name := m.Name
	params := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	var args, callArgs []jen.Code
	callArgs = append(callArgs, jen.Id("ctx"))
	if m.Mode == ir.ModeAtomic {
		callArgs = append(callArgs, jen.Id("tx"))
	}
	if inTx {
		name = names.InTx(name)
		params = append(params, jen.Id("tx").Add(TxType(m)))
	}
	for _, p := range m.Params {
		params = append(params, jen.Id(p.Local).Add(e.Type(p.Type)))
		args = append(args, jen.Id(p.Local))
		callArgs = append(callArgs, jen.Id(p.Local))
	}
	results := []jen.Code{jen.Error()}
	if m.Result != nil {
		results = []jen.Code{e.Type(m.Result), jen.Error()}
	}
	fn := entry(m, inTx)
	coreArgs := []jen.Code{jen.Id("ctx"), jen.Id("w").Dot("store")}
	bodyParams := []jen.Code{jen.Id("ctx").Qual("context", "Context")}
	switch {
	case inTx:
		coreArgs = append(coreArgs, jen.Id("tx"))
		bodyParams = append(bodyParams, jen.Id("tx").Add(TxType(m)))
	case m.Mode == ir.ModeAtomic:
		bodyParams = append(bodyParams, jen.Id("tx").Add(TxType(m)))
	}
	coreArgs = append(coreArgs, jen.Id(e.names.MethodVar(m)), jen.Id(e.names.Fingerprint(m)).Call(args...))
	inner := jen.Id("w").Dot("inner").Dot(m.Name).Call(callArgs...)
	var bodyStmts []jen.Code
	if m.Result != nil {
		bodyStmts = []jen.Code{jen.Return(inner)}
	} else {
		bodyStmts = []jen.Code{jen.Return(jen.Struct().Values(), inner)}
	}
	body := jen.Func().Params(bodyParams...).Params(e.Result(m), jen.Error()).Block(bodyStmts...)
	call := jen.Qual(ir.IdemPath, fn).Call(append(coreArgs, body)...)
	var block []jen.Code
	if m.RequestKey != nil {
		block = append(block, e.requestKey(m))
	}
	if m.Result != nil {
		block = append(block, jen.Return(call))
	} else {
		block = append(block, jen.List(jen.Id("_"), jen.Id("err")).Op(":=").Add(call), jen.Return(jen.Id("err")))
	}
	doc := []string{
		fmt.Sprintf("%s is %s run inside the caller's transaction tx, under a savepoint: the claim,", name, m.Name),
		"the work and the stored response commit with tx, and a refused claim (replay, mismatch) leaves tx usable.",
		fmt.Sprintf("Keys, retention, final errors and fingerprint are %s's.", m.Name),
	}
	if !inTx {
		doc = []string{fmt.Sprintf("%s calls %s at most once per idempotency key (idem.ContextWithKey) within its scope", name, m.Key),
			"(idem.ContextWithScope); a retry with the same key and request replays the stored response, and the same key with",
			"another request fails with idem.ErrMismatch.",
			modeText(m), retentionText(m), finalText(m), fingerprintText(m)}
		doc = append(doc, effectsText(m)...)
		if k := m.RequestKey; k != nil {
			doc = append(doc[:3], append([]string{fmt.Sprintf("Key: %s (-key), unless ctx carries one from idem.ContextWithKey; it replaces a consumer's message ID (idem.ContextWithFallbackKey).", k.Text)}, doc[3:]...)...)
		}
	}
	return Comment(doc...).Line().Func().Params(jen.Id("w").Op("*").Id(names.Wrapper(r.Name))).Id(name).Params(params...).Params(results...).Block(block...).Line()
}

// requestKey puts the request's key field into ctx (-key), replacing a
// fallback key and yielding to one set by idem.ContextWithKey, after
// checking the pointers on the way for nil:
//
//	ctx = idem.ContextWithDefaultKey(ctx, evt.EventID)
func (e *Emitter) requestKey(m *ir.Method) jen.Code {
	k := m.RequestKey
	v := jen.Id(m.Params[k.Param].Local)
	var nils *jen.Statement
	for i, name := range k.Path {
		if slices.Contains(k.Nil, i) {
			if nils != nil {
				nils = nils.Op("&&")
			} else {
				nils = jen.Null()
			}
			nils = nils.Add(v.Clone().Op("!=").Nil())
		}
		v = v.Clone().Dot(name)
	}
	switch k.Conv {
	case "string":
		v = jen.String().Call(v)
	case "uuid":
		v = jen.Qual(ir.IdemPath, "UUIDKey").Call(v)
	}
	set := jen.Id("ctx").Op("=").Qual(ir.IdemPath, "ContextWithDefaultKey").Call(jen.Id("ctx"), v)
	if nils == nil {
		return set
	}
	return jen.If(nils).Block(set)
}
