package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// inlineTest: the essay's test for an inline-mode method, counting rows in
// the business table itself.
//
//	func TestIdempotentShopCreateOrder(t *testing.T) {
//		setup := func(t *testing.T) (*idemgenEnv, *Shop, *IdempotentShop) { ... }
//		keyed := func(t *testing.T, env *idemgenEnv, key string) int { ... }
//		t.Run("twins", ...)
//		...
//	}
func (e *emitter) inlineTest(r *Receiver, m *Method) jen.Code {
	in := m.Inline
	args := testArgs(m)
	argIDs := func() []jen.Code {
		var out []jen.Code
		for _, a := range args {
			out = append(out, jen.Id(a))
		}
		return out
	}
	resultT := func() *jen.Statement { return jen.Id(tResult).Types(e.result(m)) }
	sample := func() jen.Code {
		if len(args) == 0 {
			return jen.Null()
		}
		return jen.List(argIDs()...).Op(":=").Id(m.SampleFixture).Call(jen.Id("t"))
	}
	setup := func() jen.Code {
		return jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t"))
	}
	ctxOf := func(key, scope string) *jen.Statement {
		return jen.Id(tCtx).Call(jen.Id("t"), jen.Lit(key), jen.Lit(scope))
	}
	callW := func(ctx jen.Code) *jen.Statement {
		return jen.Id("w").Dot(m.Name).Call(append([]jen.Code{ctx}, argIDs()...)...)
	}
	fatal := func(format string, a ...jen.Code) jen.Code {
		return jen.Id("t").Dot("Fatalf").Call(append([]jen.Code{jen.Lit(format)}, a...)...)
	}
	once := func(ctx jen.Code, what string) jen.Code {
		return jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(callW(ctx)), jen.Err().Op("!=").Nil()).Block(fatal(what+": %v", jen.Err()))
	}
	asResult := func(ctx jen.Code) jen.Code {
		return jen.Func().Params(jen.Int()).Add(resultT()).Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(callW(ctx)),
			jen.Return(resultT().Values(jen.Id("r"), jen.Err())),
		)
	}
	// wantKeyed: the business table holds want rows carrying key.
	wantKeyed := func(key string, want int) jen.Code {
		return jen.If(jen.Id("got").Op(":=").Id("keyed").Call(jen.Id("t"), jen.Id("env"), jen.Lit(key)), jen.Id("got").Op("!=").Lit(want)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit(fmt.Sprintf("%s holds %%d rows with key %q, want %d", in.Table, key, want)), jen.Id("got")))
	}
	sub := func(name, doc string, body ...jen.Code) jen.Code {
		return jen.Id("t").Dot("Run").Call(jen.Lit(name), jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
			append([]jen.Code{jen.Comment(doc)}, body...)...))
	}
	retention := jen.Qual(idemPath, "DefaultRetention")
	retentionText := "the store's retention"
	if m.Retention > 0 {
		retention = duration(m.Retention).(*jen.Statement)
		retentionText = formatDuration(m.Retention)
	}
	age := func(key string) jen.Code {
		return jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("env").Dot("db").Dot("Pool").Dot("Exec").Call(jen.Id("t").Dot("Context").Call(),
			jen.Op("`UPDATE "+in.TableQuoted+" SET "+ledger.Quote(ledger.InlineClaimedAtColumn)+" = "+ledger.Quote(ledger.InlineClaimedAtColumn)+" - $1::bigint * interval '1 microsecond' WHERE "+ledger.Quote(ledger.InlineKeyColumn)+" = $2`"),
			jen.Parens(retention.Clone().Op("+").Qual("time", "Minute")).Dot("Microseconds").Call(), jen.Lit(key)),
			jen.Err().Op("!=").Nil()).Block(fatal("age the key: %v", jen.Err()))
	}

	var ddl []jen.Code
	for _, s := range in.DDL {
		ddl = append(ddl, jen.Op("`"+s+"`")) // identifiers are validated: no backquote
	}
	body := []jen.Code{
		jen.Comment(fmt.Sprintf("setup builds the service (fixture %s) on a fresh database, adds the inline-mode", r.Fixture)),
		jen.Comment(fmt.Sprintf("columns and index to %s if the fixture has not, and wraps it with a store that reads", in.Table)),
		jen.Comment("the database clock, which stamps the key's claimed-at column."),
		jen.Id("setup").Op(":=").Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Params(jen.Op("*").Id(tEnv), jen.Op("*").Id(r.Name), jen.Op("*").Id(r.Wrapper)).Block(
			jen.Id("env").Op(":=").Id(tNewEnv).Call(jen.Id("t")),
			jen.Id("svc").Op(":=").Id(r.Fixture).Call(jen.Id("t"), jen.Id("env").Dot("db")),
			jen.For(jen.List(jen.Id("_"), jen.Id("stmt")).Op(":=").Range().Index().String().Values(ddl...)).Block(
				jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("env").Dot("db").Dot("Pool").Dot("Exec").Call(jen.Id("t").Dot("Context").Call(), jen.Id("stmt")),
					jen.Err().Op("!=").Nil()).Block(fatal(fmt.Sprintf("add inline mode to %s: %%v", in.Table), jen.Err())),
			),
			jen.List(jen.Id("store"), jen.Err()).Op(":=").Qual(idemPath, "NewStore").Call(jen.Id("env").Dot("db").Dot("Pool"), jen.Qual(idemPath, "WithTable").Call(jen.Lit(e.m.Table))),
			jen.If(jen.Err().Op("!=").Nil()).Block(fatal("idem.NewStore: %v", jen.Err())),
			jen.Return(jen.Id("env"), jen.Id("svc"), jen.Id(r.Constructor).Call(jen.Id("svc"), jen.Id("store"))),
		),
		jen.Comment(fmt.Sprintf("keyed counts the rows of %s that carry key.", in.Table)),
		jen.Id("keyed").Op(":=").Func().Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("env").Op("*").Id(tEnv), jen.Id("key").String()).Int().Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Var().Id("n").Int(),
			jen.If(jen.Err().Op(":=").Id("env").Dot("db").Dot("Pool").Dot("QueryRow").Call(jen.Id("t").Dot("Context").Call(),
				jen.Op("`SELECT count(*) FROM "+in.TableQuoted+" WHERE "+ledger.Quote(ledger.InlineKeyColumn)+" = $1`"), jen.Id("key")).Dot("Scan").Call(jen.Op("&").Id("n")),
				jen.Err().Op("!=").Nil()).Block(fatal(fmt.Sprintf("count rows of %s: %%v", in.Table), jen.Err())),
			jen.Return(jen.Id("n")),
		),
		jen.Comment(fmt.Sprintf("total counts every row of %s.", in.Table)),
		jen.Id("total").Op(":=").Func().Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("env").Op("*").Id(tEnv)).Int().Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Var().Id("n").Int(),
			jen.If(jen.Err().Op(":=").Id("env").Dot("db").Dot("Pool").Dot("QueryRow").Call(jen.Id("t").Dot("Context").Call(),
				jen.Op("`SELECT count(*) FROM "+in.TableQuoted+"`")).Dot("Scan").Call(jen.Op("&").Id("n")),
				jen.Err().Op("!=").Nil()).Block(fatal(fmt.Sprintf("count rows of %s: %%v", in.Table), jen.Err())),
			jen.Return(jen.Id("n")),
		),
	}

	body = append(body, sub("twins", fmt.Sprintf("Two identical requests released at once: one row in %s, equal responses.", in.Table),
		setup(), sample(),
		jen.Id("env").Dot("warmUp").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("rs").Op(":=").Qual(idemtestPath, "Twins").Call(jen.Id("t"), asResult(ctxOf("twins", ""))),
		jen.Id(tSame).Call(jen.Id("t"), jen.Id("rs").Index(jen.Op(":"))),
		wantKeyed("twins", 1),
	))
	body = append(body, sub("storm", fmt.Sprintf("%d identical requests released at once: one row in %s, equal responses.", m.Storm, in.Table),
		setup(), sample(),
		jen.Id("env").Dot("warmUp").Call(jen.Id("t"), jen.Lit(m.Storm)),
		jen.Id("rs").Op(":=").Qual(idemtestPath, "Storm").Call(jen.Id("t"), jen.Lit(m.Storm), asResult(ctxOf("storm", ""))),
		jen.Id(tSame).Call(jen.Id("t"), jen.Id("rs")),
		wantKeyed("storm", 1),
	))
	if m.Mutation != nil {
		body = append(body, sub("same key, different request", "The same key with another request is refused with idem.ErrMismatch and writes nothing.",
			setup(), sample(),
			jen.Id("ctx").Op(":=").Add(ctxOf("reused", "")),
			once(jen.Id("ctx"), "first request"),
			jen.Add(e.changeRequest(m, args)()).Comment("another request under the same key"),
			jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(callW(jen.Id("ctx"))), jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrMismatch"))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("same key, different request: got error %v, want idem.ErrMismatch"), jen.Err())),
			wantKeyed("reused", 1),
		))
	} else {
		body = append(body, jen.Comment(fmt.Sprintf("No mismatch test: no fingerprinted scalar of %s is reachable through struct fields to change.", m.Key)))
	}
	body = append(body, sub("same key, two scopes", "The same key in two scopes (tenants) names two requests: two rows.",
		setup(), sample(),
		once(ctxOf("shared", "tenant-a"), "tenant-a"),
		once(ctxOf("shared", "tenant-b"), "tenant-b"),
		wantKeyed("shared", 2),
	))
	body = append(body, sub("expired key", fmt.Sprintf("A key sent again after %s is treated as new: a second row, the first keeps its data; the sweep then takes the key off the rows and deletes none.", retentionText),
		setup(), sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("expiring", "")),
		jen.Id("before").Op(":=").Id("total").Call(jen.Id("t"), jen.Id("env")),
		once(jen.Id("ctx"), "first request"),
		age("expiring"),
		once(jen.Id("ctx"), "the same key after its retention"),
		wantKeyed("expiring", 1),
		jen.If(jen.Id("got").Op(":=").Id("total").Call(jen.Id("t"), jen.Id("env")), jen.Id("got").Op("!=").Id("before").Op("+").Lit(2)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit(in.Table+" holds %d rows, want %d: both requests' rows stay"), jen.Id("got"), jen.Id("before").Op("+").Lit(2))),
		age("expiring"),
		jen.If(jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("w").Dot("Sweep"+m.Name+"Keys").Call(jen.Id("t").Dot("Context").Call(), jen.Lit(0)),
			jen.Err().Op("!=").Nil().Op("||").Id("n").Op("!=").Lit(1)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("sweep: cleared %d keys (err %v), want 1"), jen.Id("n"), jen.Err())),
		wantKeyed("expiring", 0),
		jen.If(jen.Id("got").Op(":=").Id("total").Call(jen.Id("t"), jen.Id("env")), jen.Id("got").Op("!=").Id("before").Op("+").Lit(2)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit(in.Table+" holds %d rows after the sweep, want %d: the sweep deletes no row"), jen.Id("got"), jen.Id("before").Op("+").Lit(2))),
	))
	inner := jen.Id("svc").Dot(m.Name).Call(append([]jen.Code{
		jen.Qual(idemPath, "ContextWithInlineKey").Call(jen.Id("ctx"), jen.Id("k")), jen.Id("tx")}, argIDs()...)...)
	body = append(body, sub("body that forgets the key", fmt.Sprintf("A body that writes no row under its own key (here %s given another key) is refused with idem.ErrKeyNotWritten, and its row rolls back.", m.Name),
		jen.List(jen.Id("env"), jen.Id("svc"), jen.Id("_")).Op(":=").Id("setup").Call(jen.Id("t")), sample(),
		jen.Id("before").Op(":=").Id("total").Call(jen.Id("t"), jen.Id("env")),
		jen.List(jen.Id("store"), jen.Err()).Op(":=").Qual(idemPath, "NewStore").Call(jen.Id("env").Dot("db").Dot("Pool"), jen.Qual(idemPath, "WithTable").Call(jen.Lit(e.m.Table))),
		jen.If(jen.Err().Op("!=").Nil()).Block(fatal("idem.NewStore: %v", jen.Err())),
		jen.List(jen.Id("_"), jen.Err()).Op("=").Qual(idemPath, "Inline").Call(ctxOf("forgetful", ""), jen.Id("store"), jen.Id(m.MethodVar),
			jen.Id(m.FingerprintFunc).Call(argIDs()...), jen.Id("svc").Dot(in.Lookup),
			jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Qual(pgxPath, "Tx")).Params(e.result(m), jen.Error()).Block(
				jen.List(jen.Id("k"), jen.Id("_")).Op(":=").Qual(idemPath, "InlineKeyFrom").Call(jen.Id("ctx")),
				jen.Id("k").Dot("Key").Op("+=").Lit("-elsewhere"),
				jen.Return(inner),
			)),
		jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrKeyNotWritten"))).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("a body that forgets its key: got error %v, want idem.ErrKeyNotWritten"), jen.Err())),
		jen.If(jen.Id("got").Op(":=").Id("total").Call(jen.Id("t"), jen.Id("env")), jen.Id("got").Op("!=").Id("before")).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit(in.Table+" holds %d rows, want %d: the refused body's row must roll back"), jen.Id("got"), jen.Id("before"))),
	))
	body = append(body, e.inlineInTxTest(m, args, sub, sample, ctxOf, wantKeyed))

	name := "Test" + r.Wrapper + m.Name
	checks := []string{"twins", fmt.Sprintf("a storm of %d", m.Storm)}
	if m.Mutation != nil {
		checks = append(checks, "mismatch")
	}
	checks = append(checks, "scopes", "expiry and the sweep", "a body that forgets its key", "the caller's transaction")
	return jen.Add(
		comment(fmt.Sprintf("%s checks the idempotency of %s (inline mode: the key is stored in %s) against a real PostgreSQL, counting rows of %s: %s.",
			name, m.Key, in.KeyColumn, in.Table, strings.Join(checks, ", "))).Line(),
		jen.Func().Id(name).Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(body...).Line(),
	)
}

// inlineInTxTest: MInTx inside one caller transaction; a retry replays,
// another request is refused, the transaction stays usable and commits one row.
func (e *emitter) inlineInTxTest(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code,
	ctxOf func(string, string) *jen.Statement, wantKeyed func(string, int) jen.Code) jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	call := func() *jen.Statement {
		return jen.Id("w").Dot(m.Name + "InTx").Call(append([]jen.Code{jen.Id("ctx"), jen.Id("tx")}, argIDs...)...)
	}
	must := func(lhs, what string) []jen.Code {
		return []jen.Code{
			jen.List(jen.Id(lhs), jen.Err()).Op(":=").Add(call()),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit(what+": %v"), jen.Err())),
		}
	}
	body := []jen.Code{
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("in-tx", "")),
		jen.List(jen.Id("tx"), jen.Err()).Op(":=").Id("env").Dot("db").Dot("Pool").Dot("Begin").Call(jen.Id("ctx")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("begin: %v"), jen.Err())),
		jen.Defer().Id("tx").Dot("Rollback").Call(jen.Id("ctx")).Comment("after Commit, a no-op"),
	}
	body = append(body, must("first", "first call")...)
	body = append(body, must("again", "retry in the same transaction")...)
	body = append(body, jen.If(jen.Op("!").Qual("reflect", "DeepEqual").Call(jen.Id("first"), jen.Id("again"))).Block(
		jen.Id("t").Dot("Errorf").Call(jen.Lit("the retry returned %#v, the first call %#v: a replay must equal the original"), jen.Id("again"), jen.Id("first"))))
	if m.Mutation != nil {
		body = append(body,
			jen.Add(e.changeRequest(m, args)()).Comment("another request under the same key"),
			jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(call()), jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrMismatch"))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("same key, different request: got error %v, want idem.ErrMismatch"), jen.Err())),
		)
	}
	body = append(body,
		jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("tx").Dot("Exec").Call(jen.Id("ctx"), jen.Lit("SELECT 1")), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("the caller's transaction is unusable after a refused claim: %v"), jen.Err())),
		jen.If(jen.Err().Op(":=").Id("tx").Dot("Commit").Call(jen.Id("ctx")), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("commit: %v"), jen.Err())),
		wantKeyed("in-tx", 1),
	)
	return sub("in the caller's transaction", "Inside one caller transaction ("+m.Name+"InTx): a retry replays, another request is refused, and the transaction stays usable.", body...)
}
