// Package golang prints a package model (ir) as the wrappers file,
// idem_gen.go: wrapper types and methods, the runtime's method
// descriptions, fingerprint functions and helpers, compile-time guards, and
// their doc prose. It also holds the rendering helpers the generated tests'
// emitter (package gotest) shares: the one ir.Type → jen.Code function,
// files, comments. Names come from package names; it imports neither
// go/types nor x/tools.
package golang

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/internal/names"
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/gen/stamp"
)

// Emitter renders the Go files of one package model.
type Emitter struct {
	m     *ir.Package
	names *names.Table
	named map[string]*ir.Named // by PkgPath + "." + Name

	emptyIsNil bool // see nilCond
	cyclic     bool // writing the helper of a recursive type: see guard
}

// New returns the emitter of m, with the names of m's generated identifiers
// allocated (names.For).
func New(m *ir.Package) *Emitter {
	e := &Emitter{m: m, names: names.For(m), named: map[string]*ir.Named{}}
	for _, n := range m.Named {
		e.named[n.Type.NamedKey()] = n
	}
	return e
}

// NewFile starts a generated file of package m: the header, the build
// constraint and the import names.
func NewFile(m *ir.Package) *jen.File {
	f := jen.NewFilePathName(m.Path, m.Name)
	f.HeaderComment(stamp.Header)
	if m.Constraint != "" {
		f.HeaderComment("//go:build " + m.Constraint)
	}
	f.ImportName("context", "context")
	f.ImportName("time", "time")
	f.ImportName("errors", "errors")
	f.ImportName("testing", "testing")
	f.ImportName("reflect", "reflect")
	f.ImportName("maps", "maps")
	f.ImportName("slices", "slices")
	f.ImportName("sync/atomic", "atomic")
	f.ImportName(ir.PgxPath, "pgx")
	f.ImportName(ir.SQLPath, "sql")
	f.ImportName(ir.IdemPath, "idem")
	f.ImportName(ir.IdemtestPath, "idemtest")
	f.ImportName(ir.IdemprotoPath, "idemproto")
	return f
}

// Render prints f.
func Render(f *jen.File) ([]byte, error) {
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("render generated code: %w", err)
	}
	return buf.Bytes(), nil
}

// File renders the wrappers file, without its stamp. The compile-time
// guards come first: when a method or a request type changes without go
// generate, the compiler reports errors in file order, so its first error
// names a guard (runGoGenerate…), which says what to do, before the
// wrapper's own broken call does.
func (e *Emitter) File() ([]byte, error) {
	f := NewFile(e.m)
	helpers := slices.Clone(e.m.Named)
	slices.SortFunc(helpers, func(a, b *ir.Named) int {
		return strings.Compare(e.names.Helper(a.Type.NamedKey()), e.names.Helper(b.Type.NamedKey()))
	})
	e.guards(f, helpers)
	for _, r := range e.m.Receivers {
		f.Add(e.wrapperType(r))
		f.Add(e.constructor(r))
		for _, m := range r.Methods {
			if m.Mode == ir.ModeInline {
				e.inlineMethod(f, r, m)
				continue
			}
			f.Add(e.methodVar(m))
			f.Add(e.wrapperMethod(r, m, false))
			if m.Mode == ir.ModeAtomic {
				f.Add(e.wrapperMethod(r, m, true))
			}
			f.Add(e.fingerprintFunc(m))
		}
	}
	for _, n := range helpers {
		f.Add(e.fingerprintHelper(n))
	}
	return Render(f)
}

// guards adds every compile-time guard: each method's signature, then each
// fingerprinted struct's fields.
func (e *Emitter) guards(f *jen.File, helpers []*ir.Named) {
	for _, r := range e.m.Receivers {
		for _, m := range r.Methods {
			if m.Mode == ir.ModeInline {
				f.Add(e.inlineGuard(m))
				continue
			}
			f.Add(e.guard(m))
		}
	}
	for _, n := range helpers {
		if g := e.structGuard(n); g != nil {
			f.Add(g)
		}
	}
}

// Type is the one ir.Type → jen.Code helper.
func (e *Emitter) Type(t *ir.Type) *jen.Statement {
	switch t.Kind {
	case ir.KindBasic:
		return jen.Id(t.Basic)
	case ir.KindNamed:
		var s *jen.Statement
		if t.PkgPath == e.m.Path {
			s = jen.Id(t.Name)
		} else {
			s = jen.Qual(t.PkgPath, t.Name)
		}
		if len(t.TypeArgs) > 0 {
			var args []jen.Code
			for _, a := range t.TypeArgs {
				args = append(args, e.Type(a))
			}
			s = s.Types(args...)
		}
		return s
	case ir.KindPointer:
		return jen.Op("*").Add(e.Type(t.Elem))
	case ir.KindSlice:
		return jen.Index().Add(e.Type(t.Elem))
	case ir.KindArray:
		return jen.Index(jen.Lit(int(t.Len))).Add(e.Type(t.Elem))
	case ir.KindMap:
		return jen.Map(e.Type(t.Key)).Add(e.Type(t.Elem))
	case ir.KindStruct:
		return e.structType(t)
	case ir.KindFunc:
		return e.funcType(t)
	case ir.KindChan:
		switch t.ChanDir {
		case "chan<-":
			return jen.Chan().Op("<-").Add(e.Type(t.Elem))
		case "<-chan":
			return jen.Op("<-").Chan().Add(e.Type(t.Elem))
		}
		return jen.Chan().Add(e.Type(t.Elem))
	case ir.KindInterface:
		var items []jen.Code
		for _, fl := range t.Fields {
			if fl.Embedded {
				items = append(items, e.Type(fl.Type))
				continue
			}
			items = append(items, jen.Id(fl.Name).Add((*e.Type(fl.Type))[1:]...))
		}
		return jen.Interface(items...)
	}
	return jen.Id(t.Expr)
}

// structType: struct{ Amount int64 `json:"amount"`; Money; *pkg.Alias }
func (e *Emitter) structType(t *ir.Type) *jen.Statement {
	var fields []jen.Code
	for _, fl := range t.Fields {
		var s *jen.Statement
		switch {
		case fl.Alias != nil:
			s = e.Type(fl.Alias)
			if fl.Type.Kind == ir.KindPointer {
				s = jen.Op("*").Add(s)
			}
		case fl.Embedded:
			s = e.Type(fl.Type)
		default:
			s = jen.Id(fl.Name).Add(e.Type(fl.Type))
		}
		if fl.Tag != "" {
			s = s.Op("`" + fl.Tag + "`")
		}
		fields = append(fields, s)
	}
	return jen.Struct(fields...)
}

// funcType: func(int, ...string) (R, error)
func (e *Emitter) funcType(t *ir.Type) *jen.Statement {
	var params, results []jen.Code
	for i, p := range t.Params {
		if t.Variadic && i == len(t.Params)-1 {
			params = append(params, jen.Op("...").Add(e.Type(p.Elem)))
			continue
		}
		params = append(params, e.Type(p))
	}
	for _, r := range t.Results {
		results = append(results, e.Type(r))
	}
	s := jen.Func().Params(params...)
	switch len(results) {
	case 0:
		return s
	case 1:
		return s.Add(results[0])
	}
	return s.Params(results...)
}

// TxType is the type of the transaction m takes: pgx.Tx or *sql.Tx.
func TxType(m *ir.Method) *jen.Statement {
	if m.Tx == ir.TxSQL {
		return jen.Op("*").Qual(ir.SQLPath, "Tx")
	}
	return jen.Qual(ir.PgxPath, "Tx")
}

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

// Result is the response type as the runtime sees it: R, or struct{} for
// error-only methods.
func (e *Emitter) Result(m *ir.Method) *jen.Statement {
	if m.Result == nil {
		return jen.Struct()
	}
	return e.Type(m.Result)
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

// Doc sentences shared by the identifiers of one method.

func retentionText(m *ir.Method) string {
	if m.Retention == 0 {
		return "Keys are kept for the store's retention (idem.WithRetention, 24h by default); a key sent after that is treated as new."
	}
	r := formatDuration(m.Retention)
	return fmt.Sprintf("Keys are kept for %s: a key sent after %s is treated as new.", r, r)
}

func modeText(m *ir.Method) string {
	if m.Mode == ir.ModeAtomic && m.Tx == ir.TxSQL {
		return "Mode: atomic, on database/sql. The claim, the work and the stored response commit in one *sql.Tx, or not at all."
	}
	if m.Mode == ir.ModeAtomic {
		return "Mode: atomic. The claim, the work and the stored response commit in one transaction, or not at all."
	}
	lt := "the store's lock timeout (1m by default)"
	if m.LockTimeout > 0 {
		lt = formatDuration(m.LockTimeout)
	}
	return fmt.Sprintf("Mode: external. The claim commits an in-progress row before the work runs outside any transaction; a retry meanwhile gets idem.ErrInProgress, and an attempt that dies is taken over after %s.", lt)
}

func finalText(m *ir.Method) string {
	if len(m.FinalErrors) == 0 {
		return "No final errors: any error lets a retry run the method again."
	}
	return fmt.Sprintf("Final errors, stored and replayed (errors.Is holds): %s. Any other error lets a retry run the method again.", strings.Join(m.FinalErrors, ", "))
}

func fingerprintText(m *ir.Method) string {
	if len(m.Fingerprinted) == 0 && len(m.Omitted) == 0 {
		return "Fingerprinted: nothing but the method name (it takes no arguments)."
	}
	s := "Fingerprinted: " + strings.Join(m.Fingerprinted, ", ") + "."
	if len(m.Fingerprinted) == 0 {
		s = "Fingerprinted: nothing but the method name."
	}
	if len(m.Omitted) > 0 {
		s += " Left out (idem:\"-\"): " + strings.Join(m.Omitted, ", ") + "."
	}
	for _, n := range encodingNotes(m.Encoding) {
		s += "\n" + n
	}
	return s
}

// effectsText lists the effects outside the transaction that the method
// reaches and an //idem:effect-ok comment allows, with the reason given.
func effectsText(m *ir.Method) []string {
	if len(m.Effects) == 0 {
		return nil
	}
	out := []string{"Allowed to repeat on a retry (//idem:effect-ok), though the transaction cannot undo them:"}
	if m.Mode == ir.ModeExternal {
		out = []string{"Allowed to repeat (//idem:effect-ok), though a step run again after a takeover repeats them:"}
	}
	for _, e := range m.Effects {
		via := ""
		if len(e.Via) > 0 {
			via = " via " + strings.Join(e.Via, " → ")
		}
		out = append(out, fmt.Sprintf("  - %s%s (%s): %s", e.Call, via, e.Pos, e.Reason))
	}
	return out
}

// encodingNotes are the doc comment's sentences on the encoding rules that
// apply to a request.
func encodingNotes(enc ir.Encoding) []string {
	var out []string
	if enc.Time {
		out = append(out, "A time.Time counts by its instant: its zone (Location) and monotonic clock reading are left out.")
	}
	if enc.NilDistinct {
		out = append(out, "A nil slice or map differs from an empty one, so a retry that sends [] or {} where the first request sent nothing is a mismatch; tag a field idem:\",emptyisnil\" to treat them alike.")
	}
	switch text := enc.Text; {
	case len(text) == 1:
		out = append(out, "A "+text[0]+" counts by its text form (MarshalText), the only part of it generated code can read.")
	case len(text) > 1:
		out = append(out, strings.Join(text[:len(text)-1], ", ")+" and "+text[len(text)-1]+" values count by their text form (MarshalText), the only part of them generated code can read.")
	}
	if len(enc.EmptyIsNil) > 0 {
		out = append(out, "Empty counts as nil (idem:\",emptyisnil\"): "+strings.Join(enc.EmptyIsNil, ", ")+".")
	}
	if len(enc.Proto) > 0 {
		out = append(out, "A protobuf message ("+strings.Join(enc.Proto, ", ")+") counts by its populated fields in field-number order (idemproto.Fingerprint):",
			"field names are not hashed and unknown fields are left out, so renaming a field or adding one left unset keeps old keys replayable.")
	}
	if len(enc.RequestID) > 0 {
		out = append(out, "Left out: "+strings.Join(enc.RequestID, ", ")+", the AIP-155 idempotency key (runtime/idemgrpc and runtime/idemconnect read it),",
			"so a retry that sends the key in metadata instead is the same request.")
	}
	return out
}

// Comment renders lines as a // doc comment.
func Comment(lines ...string) *jen.Statement {
	s := jen.Null()
	for i, l := range lines {
		for j, part := range strings.Split(l, "\n") {
			if i > 0 || j > 0 {
				s = s.Line()
			}
			s = s.Comment(part)
		}
	}
	return s
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

// guard: the type's name is in the compiler's error when the method changes
// ("cannot use (*Payments).Charge (...) as runGoGeneratePaymentsCharge value").
//
//	type runGoGeneratePaymentsCharge func(*Payments, context.Context, pgx.Tx, ChargeRequest) (Receipt, error)
//	var _ runGoGeneratePaymentsCharge = (*Payments).Charge
func (e *Emitter) guard(m *ir.Method) jen.Code {
	params := []jen.Code{jen.Op("*").Id(m.Receiver), jen.Qual("context", "Context")}
	if m.Mode == ir.ModeAtomic {
		params = append(params, TxType(m))
	}
	for _, p := range m.Params {
		params = append(params, e.Type(p.Type))
	}
	results := []jen.Code{jen.Error()}
	if m.Result != nil {
		results = []jen.Code{e.Type(m.Result), jen.Error()}
	}
	return Comment(fmt.Sprintf("%s is the signature of %s this file was generated from. The build fails", e.names.Guard(m), m.Key),
		"below, naming this type, if the method changes: run go generate.").Line().
		Type().Id(e.names.Guard(m)).Func().Params(params...).Params(results...).Line().Line().
		Var().Id("_").Id(e.names.Guard(m)).Op("=").Parens(jen.Op("*").Id(m.Receiver)).Dot(m.Name).Line()
}

// fingerprintFunc:
//
//	func fingerprintPaymentsCharge(req ChargeRequest) []byte {
//		f := idem.NewFingerprinter("Payments.Charge"); f.Field("req"); fpChargeRequest(f, req); return f.Sum()
//	}
func (e *Emitter) fingerprintFunc(m *ir.Method) jen.Code {
	var params []jen.Code
	body := []jen.Code{jen.Id("f").Op(":=").Qual(ir.IdemPath, "NewFingerprinter").Call(jen.Lit(m.Key))}
	for _, p := range m.Params {
		params = append(params, jen.Id(p.Local).Add(e.Type(p.Type)))
		body = append(body, jen.Id("f").Dot("Field").Call(jen.Lit(p.Name)))
		if len(p.ProtoOmit) > 0 {
			// idemproto.Fingerprint(f, req, "request_id")
			args := []jen.Code{jen.Id("f"), jen.Id(p.Local)}
			for _, o := range p.ProtoOmit {
				args = append(args, jen.Lit(o))
			}
			body = append(body, jen.Qual(ir.IdemprotoPath, "Fingerprint").Call(args...))
			continue
		}
		body = append(body, e.fpValue(p.Type, jen.Id(p.Local), 0)...)
	}
	body = append(body, jen.Return(jen.Id("f").Dot("Sum").Call()))
	return Comment(
		fmt.Sprintf("%s returns the request fingerprint of %s: SHA-256 (idem.Fingerprinter) over", e.names.Fingerprint(m), m.Key),
		"the method name and each argument, field by field. The idempotency key and scope are not part of it.",
		fmt.Sprintf("What it hashes, and what it leaves out, is listed in %s's doc comment.", m.Name),
	).Line().Func().Id(e.names.Fingerprint(m)).Params(params...).Index().Byte().Block(body...).Line()
}

// fingerprintHelper:
//
//	func fpChargeRequest(f *idem.Fingerprinter, v ChargeRequest) { f.Field("Amount"); f.Int(int64(v.Amount)); ... }
func (e *Emitter) fingerprintHelper(n *ir.Named) jen.Code {
	params := jen.Params(jen.Id("f").Op("*").Qual(ir.IdemPath, "Fingerprinter"), jen.Id("v").Add(e.Type(n.Type)))
	if n.Text {
		// func fpNetipAddr(f *idem.Fingerprinter, v netip.Addr) { f.Text(v) }
		arg := jen.Id("v")
		if n.TextPtr {
			arg = jen.Op("&").Id("v")
		}
		return Comment(fmt.Sprintf("%s writes %s %s into a fingerprint by its text form (MarshalText): its fields are unexported in package %s.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), path.Base(n.Type.PkgPath))).Line().
			Func().Id(e.names.Helper(n.Type.NamedKey())).Add(params).Block(jen.Id("f").Dot("Text").Call(arg)).Line()
	}
	var hashed, left []string
	if n.Underlying.Kind == ir.KindStruct {
		for _, fl := range n.Underlying.Fields {
			if fl.Omitted {
				if fl.Name != "_" {
					left = append(left, fl.Name)
				}
			} else {
				hashed = append(hashed, fl.Name)
			}
		}
	}
	doc := fmt.Sprintf("%s writes %s %s into a fingerprint.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display())
	if n.Underlying.Kind == ir.KindStruct {
		doc = fmt.Sprintf("%s writes %s %s into a fingerprint, field by field: %s.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), orNone(hashed))
		if len(left) > 0 {
			doc += fmt.Sprintf(" Left out (idem:\"-\"): %s.", strings.Join(left, ", "))
		}
	}
	v := jen.Id("v")
	if n.Underlying.Kind == ir.KindNamed {
		// type Date time.Time: hashed as the type it converts to.
		doc = fmt.Sprintf("%s writes %s %s into a fingerprint, as the %s.%s it converts to.", e.names.Helper(n.Type.NamedKey()), article(n.Type.Name), n.Type.Display(), path.Base(n.Underlying.PkgPath), n.Underlying.Name)
		v = e.Type(n.Underlying).Call(v)
	}
	if n.Recursive {
		doc += fmt.Sprintf(" %s is recursive, so a value may be cyclic: f.Enter writes a back reference where the value reaches a pointer, slice or map it is already inside.", n.Type.Name)
	}
	e.cyclic = n.Recursive
	body := e.fpValue(n.Underlying, v, 0)
	e.cyclic = false
	return Comment(doc).Line().Func().Id(e.names.Helper(n.Type.NamedKey())).Add(params).Block(body...).Line()
}

// cycleGuard wraps the statements that write the contents of reference v (a
// pointer, slice or map whose element type t can lead back to a recursive
// type) in a cycle check:
//
//	if f.Enter(v.Next) { fpNode(f, *v.Next); f.Leave() }
func (e *Emitter) cycleGuard(t *ir.Type, v *jen.Statement, body []jen.Code) []jen.Code {
	if !e.cyclic || !e.reachesRecursive(t, map[*ir.Named]bool{}) {
		return body
	}
	return []jen.Code{jen.If(jen.Id("f").Dot("Enter").Call(v.Clone())).Block(append(body, jen.Id("f").Dot("Leave").Call())...)}
}

// reachesRecursive reports whether a value of type t can hold a value of a
// recursive named type.
func (e *Emitter) reachesRecursive(t *ir.Type, seen map[*ir.Named]bool) bool {
	if t == nil {
		return false
	}
	switch t.Kind {
	case ir.KindNamed:
		n := e.named[t.NamedKey()]
		if n == nil || seen[n] {
			return false
		}
		seen[n] = true
		return n.Recursive || e.reachesRecursive(n.Underlying, seen)
	case ir.KindStruct:
		for _, fl := range t.Fields {
			if !fl.Omitted && e.reachesRecursive(fl.Type, seen) {
				return true
			}
		}
		return false
	}
	return e.reachesRecursive(t.Elem, seen)
}

func article(name string) string {
	if name != "" && strings.ContainsRune("AEIOUaeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// structGuard makes the build fail when a fingerprinted struct gains, loses
// or changes a field after generation, with an error that names the guard's
// type ("cannot convert ChargeRequest{} (...) to type runGoGenerateChargeRequestFields"):
//
//	type runGoGenerateChargeRequestFields struct{ Amount int64; Currency string }
//	var _ = runGoGenerateChargeRequestFields(ChargeRequest{})
func (e *Emitter) structGuard(n *ir.Named) jen.Code {
	if n.Text || n.Underlying.Kind != ir.KindStruct {
		return nil
	}
	for _, fl := range n.Underlying.Fields {
		if fl.Type.Kind == ir.KindOther && strings.Contains(fl.Type.Expr, ".") {
			return nil
		}
	}
	return Comment(fmt.Sprintf("%s holds the fields of %s that %s was generated for. The build", e.names.FieldsGuard(n.Type.NamedKey()), n.Type.Display(), e.names.Helper(n.Type.NamedKey())),
		"fails below, naming this type, if they change: run go generate so that "+e.names.Helper(n.Type.NamedKey())+" hashes them.").Line().
		Type().Id(e.names.FieldsGuard(n.Type.NamedKey())).Add(e.Type(n.Underlying)).Line().Line().
		Var().Id("_").Op("=").Id(e.names.FieldsGuard(n.Type.NamedKey())).Parens(e.Type(n.Type).Values()).Line()
}

// fpValue writes the statements that hash value v of type t.
func (e *Emitter) fpValue(t *ir.Type, v *jen.Statement, depth int) []jen.Code {
	f := func(method string, args ...jen.Code) jen.Code { return jen.Id("f").Dot(method).Call(args...) }
	switch t.Kind {
	case ir.KindBasic:
		return e.fpBasic(t.Basic, v, false)
	case ir.KindNamed:
		if t.PkgPath == "time" && t.Name == "Time" {
			return []jen.Code{f("Time", v)}
		}
		if n := e.named[t.NamedKey()]; n != nil {
			return []jen.Code{jen.Id(e.names.Helper(n.Type.NamedKey())).Call(jen.Id("f"), v)}
		}
		return e.fpBasic(t.Basic, v, true)
	case ir.KindPointer:
		if t.Proto {
			// idemproto.Fingerprint(f, v.Order): fields by number, nil included.
			return []jen.Code{jen.Qual(ir.IdemprotoPath, "Fingerprint").Call(jen.Id("f"), v)}
		}
		return []jen.Code{jen.If(v.Clone().Op("==").Nil()).Block(f("Nil")).Else().Block(
			append([]jen.Code{f("Ptr")}, e.cycleGuard(t.Elem, v, e.fpValue(t.Elem, deref(t.Elem, v), depth))...)...)}
	case ir.KindSlice, ir.KindArray:
		if t.Kind == ir.KindSlice && t.Elem.Kind == ir.KindBasic && (t.Elem.Basic == "byte" || t.Elem.Basic == "uint8") {
			return []jen.Code{f("Bytes", v)}
		}
		el := jen.Id(names.LoopElem(depth))
		var cond *jen.Statement
		if t.Kind == ir.KindSlice {
			cond = e.nilCond(v) // before the elements, which may hold slices
		}
		loop := []jen.Code{jen.For(jen.List(jen.Id("_"), el.Clone()).Op(":=").Range().Add(v.Clone())).Block(e.fpValue(t.Elem, el, depth+1)...)}
		if t.Kind == ir.KindArray {
			return append([]jen.Code{f("Len", jen.Len(v.Clone()))}, loop...)
		}
		return []jen.Code{jen.If(cond).Block(f("Nil")).Else().Block(append([]jen.Code{f("Len", jen.Len(v.Clone()))}, e.cycleGuard(t.Elem, v, loop)...)...)}
	case ir.KindMap:
		k := jen.Id(names.LoopKey(depth))
		cond := e.nilCond(v)
		body := append(e.fpValue(t.Key, k.Clone(), depth+1), e.fpValue(t.Elem, v.Clone().Index(k.Clone()), depth+1)...)
		loop := []jen.Code{jen.For(jen.List(jen.Id("_"), k.Clone()).Op(":=").Range().Qual("slices", "Sorted").Call(jen.Qual("maps", "Keys").Call(v.Clone()))).Block(body...)}
		return []jen.Code{jen.If(cond).Block(f("Nil")).Else().Block(
			append([]jen.Code{f("Len", jen.Len(v.Clone()))}, e.cycleGuard(t.Elem, v, loop)...)...,
		)}
	case ir.KindStruct:
		var out []jen.Code
		for _, fl := range t.Fields {
			if fl.Omitted {
				continue
			}
			out = append(out, f("Field", jen.Lit(fl.Name)))
			// idem:",emptyisnil": an empty value is written as nil.
			bytes := fl.Type.Kind == ir.KindSlice && fl.Type.Elem.Kind == ir.KindBasic && (fl.Type.Elem.Basic == "byte" || fl.Type.Elem.Basic == "uint8")
			collection := fl.Type.Kind == ir.KindMap || fl.Type.Kind == ir.KindSlice && !bytes
			e.emptyIsNil = fl.EmptyIsNil && collection
			val := e.fpValue(fl.Type, v.Clone().Dot(fl.Name), depth)
			if fl.EmptyIsNil && !collection {
				val = []jen.Code{jen.If(jen.Len(v.Clone().Dot(fl.Name)).Op("==").Lit(0)).Block(f("Nil")).Else().Block(val...)}
			}
			out = append(out, val...)
		}
		return out
	}
	return []jen.Code{jen.Comment("unsupported type " + t.Expr)}
}

// nilCond is the test under which a slice or map v is written as nil:
// v == nil, or len(v) == 0 for a field tagged idem:",emptyisnil" (set in
// e.emptyIsNil by the struct field being written, and used up here).
func (e *Emitter) nilCond(v *jen.Statement) *jen.Statement {
	if e.emptyIsNil {
		e.emptyIsNil = false
		return jen.Len(v.Clone()).Op("==").Lit(0)
	}
	return v.Clone().Op("==").Nil()
}

func (e *Emitter) fpBasic(basic string, v *jen.Statement, named bool) []jen.Code {
	call := func(method, conv string) []jen.Code {
		arg := v.Clone()
		if named || basic != conv {
			arg = jen.Id(conv).Call(v.Clone())
		}
		return []jen.Code{jen.Id("f").Dot(method).Call(arg)}
	}
	switch basic {
	case "bool":
		return call("Bool", "bool")
	case "string":
		return call("String", "string")
	case "int", "int8", "int16", "int32", "int64", "rune":
		return call("Int", "int64")
	case "uint", "uint8", "uint16", "uint32", "uint64", "uintptr", "byte":
		return call("Uint", "uint64")
	case "float32", "float64":
		return call("Float", "float64")
	case "complex64", "complex128":
		return []jen.Code{
			jen.Id("f").Dot("Float").Call(jen.Float64().Call(jen.Real(v.Clone()))),
			jen.Id("f").Dot("Float").Call(jen.Float64().Call(jen.Imag(v.Clone()))),
		}
	}
	return []jen.Code{jen.Comment("unsupported basic type " + basic)}
}

// deref dereferences a pointer expression, with parentheses only where a
// selector or index follows.
func deref(elem *ir.Type, v *jen.Statement) *jen.Statement {
	if elem.Kind == ir.KindMap || elem.Kind == ir.KindStruct {
		return jen.Parens(jen.Op("*").Add(v.Clone()))
	}
	return jen.Op("*").Add(v.Clone())
}

// Names is the naming table of the model.
func (e *Emitter) Names() *names.Table { return e.names }

// formatDuration prints a duration the way a person writes it: 48h, 90m, 30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	for _, suf := range []string{"h0m0s", "m0s"} {
		if strings.HasSuffix(s, suf) {
			s = strings.TrimSuffix(s, suf) + suf[:1]
		}
	}
	return s
}
