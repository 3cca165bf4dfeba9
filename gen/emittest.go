package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// Identifiers of the generated tests' shared helpers.
const (
	tEnv      = "idemgenEnv"
	tNewEnv   = "newIdemgenEnv"
	tCtx      = "idemgenCtx"
	tResult   = "idemgenResult"
	tSame     = "idemgenSame"
	tInjected = "errIdemgenInjected"
)

// emitTests renders the twin-request tests file. The tests use only the
// standard library, the package under test and the idemgen runtime.
func (e *emitter) emitTests() ([]byte, error) {
	f := newFile(e.m)
	f.Add(e.testHelpers())
	for _, r := range e.m.Receivers {
		for _, m := range r.Methods {
			if m.Mode == ModeInline {
				f.Add(e.inlineTest(r, m))
				continue
			}
			f.Add(e.methodTest(r, m))
		}
	}
	return render(f)
}

// testHelpers: the per-test environment (fresh database, controllable clock,
// a store whose hooks count body executions) and small assertions.
func (e *emitter) testHelpers() jen.Code {
	t := jen.Id("t").Op("*").Qual("testing", "T")
	tbl := e.m.Table
	return jen.Add(
		comment(tEnv+" is one test's fresh database, its ledger store, the store's clock and a count of method",
			"bodies run (through the store's Executed hook, so the service's code is untouched).").Line(),
		jen.Type().Id(tEnv).Struct(
			jen.Id("db").Op("*").Qual(idemtestPath, "DB"),
			jen.Id("clock").Op("*").Qual(idemtestPath, "Clock"),
			jen.Id("store").Op("*").Qual(idemPath, "Store"),
			jen.Id("executed").Qual("sync/atomic", "Int64"),
			jen.Id("meeting").Qual("sync/atomic", "Pointer").Types(jen.Qual(idemtestPath, "Meeting")),
			jen.Id("effects").Func().Params(jen.Op("*").Qual("testing", "T"), jen.Op("*").Qual(idemtestPath, "DB")).Int(),
			jen.Id("effectsBefore").Int(),
		).Line().Line(),

		comment(tNewEnv+" creates a fresh database holding the ledger table "+tbl+" and a store over it.").Line(),
		jen.Func().Id(tNewEnv).Params(t.Clone()).Op("*").Id(tEnv).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Id("env").Op(":=").Op("&").Id(tEnv).Values(jen.Dict{
				jen.Id("db"):    jen.Qual(idemtestPath, "New").Call(jen.Id("t"), jen.Qual(idemtestPath, "WithTable").Call(jen.Lit(tbl))),
				jen.Id("clock"): jen.Qual(idemtestPath, "NewClock").Call(jen.Qual("time", "Time").Values()),
			}),
			jen.List(jen.Id("store"), jen.Err()).Op(":=").Qual(idemPath, "NewStore").Call(
				jen.Id("env").Dot("db").Dot("Pool"),
				jen.Line().Qual(idemPath, "WithTable").Call(jen.Lit(tbl)),
				jen.Line().Qual(idemPath, "WithClock").Call(jen.Id("env").Dot("clock").Dot("Now")),
				jen.Line().Qual(idemPath, "WithHooks").Call(jen.Qual(idemPath, "Hooks").Values(jen.Dict{
					jen.Id("Executed"): jen.Func().Params(jen.Qual("context", "Context"), jen.Qual(idemPath, "Event")).Block(
						jen.Id("env").Dot("executed").Dot("Add").Call(jen.Lit(1))),
					jen.Id("Claimed"): jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("_").Qual(idemPath, "Event")).Block(
						jen.If(jen.Id("m").Op(":=").Id("env").Dot("meeting").Dot("Load").Call(), jen.Id("m").Op("!=").Nil()).Block(
							jen.Id("m").Dot("Claimed").Call(jen.Id("ctx")))),
					jen.Id("InProgress"): jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("_").Qual(idemPath, "Event")).Block(
						jen.If(jen.Id("m").Op(":=").Id("env").Dot("meeting").Dot("Load").Call(), jen.Id("m").Op("!=").Nil()).Block(
							jen.Id("m").Dot("Waited").Call(jen.Id("ctx")))),
				})).Op(",").Line(),
			),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("idem.NewStore: %v"), jen.Err())),
			jen.Id("env").Dot("store").Op("=").Id("store"),
			jen.Return(jen.Id("env")),
		).Line().Line(),

		comment("warmUp opens n pooled connections (at most the pool's size) before a race, so the concurrent",
			"requests meet on the ledger's unique index rather than queue behind connection set-up.").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("warmUp").Params(t.Clone(), jen.Id("n").Int()).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Var().Id("release").Index().Func().Params(),
			jen.For(jen.Range().Min(jen.Id("n"), jen.Int().Call(jen.Id("env").Dot("db").Dot("Pool").Dot("Config").Call().Dot("MaxConns")))).Block(
				jen.List(jen.Id("c"), jen.Err()).Op(":=").Id("env").Dot("db").Dot("Pool").Dot("Acquire").Call(jen.Id("t").Dot("Context").Call()),
				jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("open a connection: %v"), jen.Err())),
				jen.Id("release").Op("=").Append(jen.Id("release"), jen.Id("c").Dot("Release")),
			),
			jen.For(jen.List(jen.Id("_"), jen.Id("r")).Op(":=").Range().Id("release")).Block(jen.Id("r").Call()),
		).Line().Line(),

		comment("meet makes the next n concurrent attempts really overlap: the first to claim the key is held in its",
			"claim until the others have met it there (idemtest.Meeting, through the store's hooks).").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("meet").Params(jen.Id("n").Int()).Op("*").Qual(idemtestPath, "Meeting").Block(
			jen.Id("m").Op(":=").Qual(idemtestPath, "NewMeeting").Call(jen.Id("env").Dot("db"), jen.Id("n")),
			jen.Id("env").Dot("meeting").Dot("Store").Call(jen.Id("m")),
			jen.Return(jen.Id("m")),
		).Line().Line(),

		comment("logMet logs how many concurrent attempts met the first one on the key while it held its claim.").Line(),
		jen.Func().Id("logMet").Params(t.Clone(), jen.Id("m").Op("*").Qual(idemtestPath, "Meeting")).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.List(jen.Id("met"), jen.Id("others")).Op(":=").Id("m").Dot("Met").Call(),
			jen.Id("t").Dot("Logf").Call(jen.Lit("%d of %d other attempts met the first on the key while it held its claim"), jen.Id("met"), jen.Id("others")),
		).Line().Line(),

		comment("countEffects starts counting the method's effects with the package's count fixture.").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("countEffects").Params(t.Clone(), jen.Id("count").Func().Params(jen.Op("*").Qual("testing", "T"), jen.Op("*").Qual(idemtestPath, "DB")).Int()).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Id("env").Dot("effects").Op("=").Id("count"),
			jen.Id("env").Dot("effectsBefore").Op("=").Id("count").Call(jen.Id("t"), jen.Id("env").Dot("db")),
		).Line().Line(),

		comment("wantEffects fails the test unless the method's effects (counted by its count fixture) grew by",
			"exactly want since setup.").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("wantEffects").Params(t.Clone(), jen.Id("want").Int()).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.If(jen.Id("got").Op(":=").Id("env").Dot("effects").Call(jen.Id("t"), jen.Id("env").Dot("db")).Op("-").Id("env").Dot("effectsBefore"), jen.Id("got").Op("!=").Id("want")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("the method's effects grew by %d, want %d"), jen.Id("got"), jen.Id("want"))),
		).Line().Line(),

		comment("wantExecutions fails the test unless method bodies ran exactly want times.").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("wantExecutions").Params(t.Clone(), jen.Id("want").Int64()).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.If(jen.Id("got").Op(":=").Id("env").Dot("executed").Dot("Load").Call(), jen.Id("got").Op("!=").Id("want")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("the method body ran %d times, want %d"), jen.Id("got"), jen.Id("want"))),
		).Line().Line(),

		comment("wantRows fails the test unless the ledger holds exactly want rows for method.").Line(),
		jen.Func().Params(jen.Id("env").Op("*").Id(tEnv)).Id("wantRows").Params(t.Clone(), jen.Id("method").String(), jen.Id("want").Int()).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.Var().Id("got").Int(),
			jen.If(
				jen.Err().Op(":=").Id("env").Dot("db").Dot("Pool").Dot("QueryRow").Call(jen.Id("t").Dot("Context").Call(),
					jen.Op("`SELECT count(*) FROM "+e.m.TableQuoted+" WHERE method = $1`"), jen.Id("method")).Dot("Scan").Call(jen.Op("&").Id("got")),
				jen.Err().Op("!=").Nil(),
			).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("count ledger rows: %v"), jen.Err())),
			jen.If(jen.Id("got").Op("!=").Id("want")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("the ledger holds %d rows for %s, want %d"), jen.Id("got"), jen.Id("method"), jen.Id("want"))),
		).Line().Line(),

		comment(tCtx+" returns the test's context carrying an idempotency key and, if not empty, a scope.").Line(),
		jen.Func().Id(tCtx).Params(t.Clone(), jen.List(jen.Id("key"), jen.Id("scope")).String()).Qual("context", "Context").Block(
			jen.Id("ctx").Op(":=").Qual(idemPath, "ContextWithKey").Call(jen.Id("t").Dot("Context").Call(), jen.Id("key")),
			jen.If(jen.Id("scope").Op("!=").Lit("")).Block(jen.Id("ctx").Op("=").Qual(idemPath, "ContextWithScope").Call(jen.Id("ctx"), jen.Id("scope"))),
			jen.Return(jen.Id("ctx")),
		).Line().Line(),

		comment(tResult+" is what one call returned.").Line(),
		jen.Type().Id(tResult).Types(jen.Id("R").Any()).Struct(jen.Id("resp").Id("R"), jen.Id("err").Error()).Line().Line(),

		comment(tSame+" fails the test unless every call succeeded and returned a response deeply equal to the",
			"first: a replay must equal the original.").Line(),
		jen.Func().Id(tSame).Types(jen.Id("R").Any()).Params(t.Clone(), jen.Id("rs").Index().Id(tResult).Types(jen.Id("R"))).Block(
			jen.Id("t").Dot("Helper").Call(),
			jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Id("rs")).Block(
				jen.If(jen.Id("r").Dot("err").Op("!=").Nil()).Block(
					jen.Id("t").Dot("Errorf").Call(jen.Lit("call %d of %d failed: %v"), jen.Id("i"), jen.Len(jen.Id("rs")), jen.Id("r").Dot("err")),
					jen.Continue(),
				),
				jen.If(jen.Op("!").Qual("reflect", "DeepEqual").Call(jen.Id("r").Dot("resp"), jen.Id("rs").Index(jen.Lit(0)).Dot("resp"))).Block(
					jen.Id("t").Dot("Errorf").Call(jen.Lit("call %d returned %#v, call 0 returned %#v: a replay must equal the original"), jen.Id("i"), jen.Id("r").Dot("resp"), jen.Id("rs").Index(jen.Lit(0)).Dot("resp")),
				),
			),
		).Line().Line(),

		comment("idemgenErr keeps the error of a call and drops its response.").Line(),
		jen.Func().Id("idemgenErr").Types(jen.Id("R").Any()).Params(jen.Id("_").Id("R"), jen.Err().Error()).Error().Block(jen.Return(jen.Err())).Line().Line(),

		comment(tInjected+" stands for a failure after the work was done.").Line(),
		jen.Var().Id(tInjected).Op("=").Qual("errors", "New").Call(jen.Lit("injected failure after the work")).Line(),
	)
}

// testReserved reports identifiers the generated tests declare themselves.
func testReserved(name string) bool {
	switch name {
	case "t", "env", "w", "svc", "ctx", "rs", "r", "err", "zero", "crashed", "crash", "setup", "tx", "first", "again",
		"before", "n", "outer", "meeting", "stepRuns", "firstKey", "takeoverKey", "takeover", "takeoverErr",
		"againKey", "outlived", "finish", "finished", "release", "sync",
		"idem", "idemtest", "pgx", "context", "time", "errors", "testing", "reflect", "atomic":
		return true
	}
	return false
}

// testArgs returns the names the tests give the sample's values.
func testArgs(m *Method) []string {
	var out []string
	for i, p := range m.Params {
		n := p.Local
		if testReserved(n) {
			n = fmt.Sprintf("arg%d", i+1)
		}
		out = append(out, n)
	}
	return out
}

// methodTest:
//
//	func TestIdempotentPaymentsCharge(t *testing.T) {
//		t.Run("twins", func(t *testing.T) { ... idemtest.Twins ... })
//		...
//	}
func (e *emitter) methodTest(r *Receiver, m *Method) jen.Code {
	args := testArgs(m)
	argIDs := func() []jen.Code {
		var out []jen.Code
		for _, a := range args {
			out = append(out, jen.Id(a))
		}
		return out
	}
	res := e.result(m)
	resultT := func() *jen.Statement { return jen.Id(tResult).Types(e.result(m)) }
	// sample declares the sample request: req := samplePaymentsChargeArgs(t)
	sample := func() jen.Code {
		if len(args) == 0 {
			return jen.Null()
		}
		return jen.List(argIDs()...).Op(":=").Id(m.SampleFixture).Call(jen.Id("t"))
	}
	// setup: env, w := setup(t)
	setup := func() jen.Code {
		return jen.List(jen.Id("env"), jen.Id("svc"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t"))
	}
	callW := func(ctx jen.Code) *jen.Statement {
		return jen.Id("w").Dot(m.Name).Call(append([]jen.Code{ctx}, argIDs()...)...)
	}
	// once: a call that must succeed.
	once := func(ctx jen.Code, what string) jen.Code {
		var call *jen.Statement
		if m.Result != nil {
			call = jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(callW(ctx))
		} else {
			call = jen.Err().Op(":=").Add(callW(ctx))
		}
		return jen.If(call, jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit(what+": %v"), jen.Err()))
	}
	// asResult: func(int) idemgenResult[R] { r, err := w.M(ctx, req...); return idemgenResult[R]{r, err} }
	asResult := func(ctx jen.Code) jen.Code {
		var body []jen.Code
		if m.Result != nil {
			body = []jen.Code{
				jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(callW(ctx)),
				jen.Return(resultT().Values(jen.Id("r"), jen.Err())),
			}
		} else {
			body = []jen.Code{jen.Return(resultT().Values(jen.Dict{jen.Id("err"): callW(ctx)}))}
		}
		return jen.Func().Params(jen.Id("i").Int()).Add(resultT()).Block(body...)
	}
	ctxOf := func(key, scope string) *jen.Statement {
		return jen.Id(tCtx).Call(jen.Id("t"), jen.Lit(key), jen.Lit(scope))
	}
	waitCtx := func(key string) *jen.Statement {
		if m.Mode == ModeExternal { // a twin waits for the attempt in progress instead of failing
			return jen.Qual(idemPath, "ContextWithWait").Call(ctxOf(key, ""))
		}
		return ctxOf(key, "")
	}
	key := jen.Lit(m.Ledger)
	// effects: env.wantEffects(t, n) when the package counts the method's effects.
	effects := func(n int) jen.Code {
		if m.EffectFixture == "" {
			return jen.Null()
		}
		return jen.Id("env").Dot("wantEffects").Call(jen.Id("t"), jen.Lit(n))
	}
	sub := func(name string, doc string, body ...jen.Code) jen.Code {
		return jen.Id("t").Dot("Run").Call(jen.Lit(name), jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
			append([]jen.Code{jen.Comment(doc)}, body...)...))
	}
	var subs []jen.Code

	twinsDoc := "Two identical requests released at once, the first held in its claim until the second blocks on the key:"
	if m.Mode == ModeExternal {
		twinsDoc = "Two identical requests released at once, the first held in its claim until the second is told to wait (idem.ContextWithWait):"
	}
	twinsDoc += " one execution, one ledger row, equal responses."
	subs = append(subs, sub("twins", twinsDoc,
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(waitCtx("twins")),
		jen.Id("env").Dot("warmUp").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("meeting").Op(":=").Id("env").Dot("meet").Call(jen.Lit(2)),
		jen.Id("rs").Op(":=").Qual(idemtestPath, "Twins").Call(jen.Id("t"), asResult(jen.Qual(idemtestPath, "Caller").Call(jen.Id("ctx"), jen.Id("i")))),
		jen.Id("logMet").Call(jen.Id("t"), jen.Id("meeting")),
		jen.Id(tSame).Call(jen.Id("t"), jen.Id("rs").Index(jen.Op(":"))),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
		effects(1),
	))
	subs = append(subs, sub("storm", fmt.Sprintf("%d identical requests released at once, the first held in its claim until the others met it: one execution, one ledger row, equal responses.", m.Storm),
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(waitCtx("storm")),
		jen.Id("env").Dot("warmUp").Call(jen.Id("t"), jen.Lit(m.Storm)),
		jen.Id("meeting").Op(":=").Id("env").Dot("meet").Call(jen.Lit(m.Storm)),
		jen.Id("rs").Op(":=").Qual(idemtestPath, "Storm").Call(jen.Id("t"), jen.Lit(m.Storm), asResult(jen.Qual(idemtestPath, "Caller").Call(jen.Id("ctx"), jen.Id("i")))),
		jen.Id("logMet").Call(jen.Id("t"), jen.Id("meeting")),
		jen.Id(tSame).Call(jen.Id("t"), jen.Id("rs")),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
		effects(1),
	))
	if m.Mutation != nil {
		change := e.changeRequest(m, args)
		subs = append(subs, sub("same key, different request", "The same key with another request is refused with idem.ErrMismatch and runs nothing.",
			jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
			sample(),
			jen.Id("ctx").Op(":=").Add(ctxOf("reused", "")),
			once(jen.Id("ctx"), "first request"),
			change(),
			jen.Err().Op(":=").Add(errOnly(m, callW(jen.Id("ctx")))),
			jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrMismatch"))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("same key, different request: got error %v, want idem.ErrMismatch"), jen.Err())),
			jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
			jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
		))
	} else {
		subs = append(subs, jen.Comment(fmt.Sprintf("No mismatch test: no fingerprinted scalar of %s is reachable through struct fields to change.", m.Key)))
	}
	subs = append(subs, sub("distinct keys", "Different keys are different requests: each runs.",
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		once(ctxOf("key-a", ""), "key-a"),
		once(ctxOf("key-b", ""), "key-b"),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(2)),
		effects(2),
	))
	subs = append(subs, sub("same key, two scopes", "The same key in two scopes (tenants) names two requests: each runs.",
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		once(ctxOf("shared", "tenant-a"), "tenant-a"),
		once(ctxOf("shared", "tenant-b"), "tenant-b"),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(2)),
		effects(2),
	))
	retention := jen.Qual(idemPath, "DefaultRetention")
	retentionText := "the store's retention"
	if m.Retention > 0 {
		retention = duration(m.Retention).(*jen.Statement)
		retentionText = formatDuration(m.Retention)
	}
	subs = append(subs, sub("expired key", fmt.Sprintf("A retry one microsecond before %s replays; one microsecond after, the key is treated as new and the method runs again.", retentionText),
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("expiring", "")),
		once(jen.Id("ctx"), "first request"),
		jen.Id("env").Dot("clock").Dot("Advance").Call(retention.Clone().Op("-").Qual("time", "Microsecond")),
		once(jen.Id("ctx"), "the same key just inside its retention"),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
		jen.Id("env").Dot("clock").Dot("Advance").Call(jen.Lit(2).Op("*").Qual("time", "Microsecond")),
		once(jen.Id("ctx"), "the same key after its retention"),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
		effects(2),
	))

	subs = append(subs, sub("sweep keeps live keys", fmt.Sprintf("Store.Sweep deletes nothing while the key's %s last, and the key once they have passed.", retentionText),
		jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("swept", "")),
		once(jen.Id("ctx"), "first request"),
		jen.Id("env").Dot("clock").Dot("Advance").Call(retention.Clone().Op("-").Qual("time", "Microsecond")),
		jen.If(jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("env").Dot("store").Dot("Sweep").Call(jen.Id("ctx"), jen.Lit(0)), jen.Err().Op("!=").Nil().Op("||").Id("n").Op("!=").Lit(0)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("a sweep inside the key's retention deleted %d rows (err %v), want 0"), jen.Id("n"), jen.Err())),
		once(jen.Id("ctx"), "retry after the sweep"),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
		jen.Id("env").Dot("clock").Dot("Advance").Call(jen.Lit(2).Op("*").Qual("time", "Microsecond")),
		jen.If(jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("env").Dot("store").Dot("Sweep").Call(jen.Id("ctx"), jen.Lit(0)), jen.Err().Op("!=").Nil().Op("||").Id("n").Op("!=").Lit(1)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("a sweep after the key's retention deleted %d rows (err %v), want 1"), jen.Id("n"), jen.Err())),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(0)),
	))

	zero := jen.Var().Id("zero").Add(res.Clone())
	innerCall := func() *jen.Statement {
		a := []jen.Code{jen.Id("ctx")}
		if m.Mode == ModeAtomic {
			a = append(a, jen.Id("tx"))
		}
		return jen.Id("svc").Dot(m.Name).Call(append(a, argIDs()...)...)
	}
	if m.Mode == ModeAtomic {
		subs = append(subs, sub("failing body leaves no claim", "The work ran but the transaction failed: nothing is stored, and a retry runs.",
			setup(),
			sample(),
			jen.Id("ctx").Op(":=").Add(ctxOf("failing", "")),
			zero,
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Qual(idemPath, "Atomic").Call(jen.Id("ctx"), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
				jen.Id(m.FingerprintFunc).Call(argIDs()...),
				jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Qual(pgxPath, "Tx")).Params(res.Clone(), jen.Error()).Block(
					jen.If(errOnlyAssign(m, innerCall()), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("zero"), jen.Err())),
					jen.Return(jen.Id("zero"), jen.Id(tInjected)),
				)),
			jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Id(tInjected))).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit("failing attempt: got error %v, want the injected failure"), jen.Err())),
			jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(0)),
			effects(0),
			once(jen.Id("ctx"), "retry after the failed attempt"),
			jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
			jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
			effects(1),
		))
		subs = append(subs, e.finalErrorTests(m, args, sub, sample, ctxOf, callW)...)
		subs = append(subs, e.inTxTest(m, args, sub, sample, ctxOf))
		subs = append(subs, e.inTxFailingTest(m, args, sub, sample, ctxOf, effects))
	} else {
		lock := jen.Qual(idemPath, "DefaultLockTimeout")
		lockText := "the store's lock timeout"
		if m.LockTimeout > 0 {
			lock = duration(m.LockTimeout).(*jen.Statement)
			lockText = formatDuration(m.LockTimeout)
		}
		subs = append(subs, sub("failing body releases the claim", "A non-final error releases the claim: a retry runs at once.",
			jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
			sample(),
			jen.Id("ctx").Op(":=").Add(ctxOf("failing", "")),
			zero.Clone(),
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Qual(idemPath, "External").Call(jen.Id("ctx"), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
				jen.Id(m.FingerprintFunc).Call(argIDs()...),
				jen.Func().Params(jen.Qual("context", "Context")).Params(res.Clone(), jen.Error()).Block(
					jen.Return(jen.Id("zero"), jen.Id(tInjected)),
				)),
			jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Id(tInjected))).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit("failing attempt: got error %v, want the injected failure"), jen.Err())),
			once(jen.Id("ctx"), "retry after the failed attempt"),
			jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
			effects(1),
		))
		subs = append(subs, e.finalErrorTests(m, args, sub, sample, ctxOf, callW)...)
		subs = append(subs, sub("crash mid-work, then takeover", fmt.Sprintf("An attempt that dies after the work keeps the key in progress; after %s a retry takes over.", lockText),
			setup(),
			sample(),
			jen.List(jen.Id("crashed"), jen.Id("crash")).Op(":=").Qual("context", "WithCancel").Call(ctxOf("crashing", "")),
			zero.Clone(),
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Qual(idemPath, "External").Call(jen.Id("crashed"), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
				jen.Id(m.FingerprintFunc).Call(argIDs()...),
				jen.Func().Params(jen.Id("ctx").Qual("context", "Context")).Params(res.Clone(), jen.Error()).Block(
					jen.If(errOnlyAssign(m, innerCall()), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("zero"), jen.Err())),
					jen.Id("crash").Call().Comment("the caller dies before the response is stored"),
					jen.Return(jen.Id("zero"), jen.Id("ctx").Dot("Err").Call()),
				)),
			jen.If(jen.Err().Op("==").Nil()).Block(jen.Id("t").Dot("Fatal").Call(jen.Lit("the crashed attempt reported success"))),
			jen.Id("ctx").Op(":=").Add(ctxOf("crashing", "")),
			jen.If(jen.Err().Op(":=").Add(errOnly(m, callW(jen.Id("ctx")))), jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrInProgress"))).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit("retry while the crashed attempt holds the key: got error %v, want idem.ErrInProgress"), jen.Err())),
			jen.Id("env").Dot("clock").Dot("Advance").Call(lock.Clone().Op("+").Qual("time", "Second")),
			once(jen.Id("ctx"), "retry after the lock timeout"),
			once(jen.Id("ctx"), "replay after the takeover"),
			jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
			jen.Id("env").Dot("wantRows").Call(jen.Id("t"), key.Clone(), jen.Lit(1)),
		))
		subs = append(subs, e.lostLockTest(m, args, sub, sample, ctxOf, callW, e.zombie(m, lock)))
		subs = append(subs, e.downstreamKeyTest(m, args, sub, sample, ctxOf, retention, retentionText))
		subs = append(subs, e.lostLockTest(m, args, sub, sample, ctxOf, callW, sweptZombie(lock, retention)))
	}

	name := "Test" + r.Wrapper + m.Name
	var checks []string
	for _, s := range []string{"twins", fmt.Sprintf("a storm of %d", m.Storm), "mismatch", "distinct keys", "scopes", "expiry"} {
		if s == "mismatch" && m.Mutation == nil {
			continue
		}
		checks = append(checks, s)
	}
	checks = append(checks, "sweeping", "a failing body")
	if len(m.FinalErrors) > 0 {
		checks = append(checks, "each final error stored and replayed")
	}
	if m.Mode == ModeAtomic {
		checks = append(checks, m.Name+"InTx with a passing and a failing body")
	} else {
		checks = append(checks, "a crash mid-work and its takeover", "an attempt that outlived its lock",
			"a new DownstreamKey after the retention", "a stale attempt after a sweep")
	}
	countEffects := jen.Null()
	effectsDoc := fmt.Sprintf("Only executions of the method body are counted, not its effects: add func %s(t *testing.T, db *idemtest.DB) int to a _test.go file to count those too.", effectFixtureName(m))
	if m.EffectFixture != "" {
		countEffects = jen.Id("env").Dot("countEffects").Call(jen.Id("t"), jen.Id(m.EffectFixture))
		effectsDoc = fmt.Sprintf("Effects are counted by %s as well as executions.", m.EffectFixture)
	}
	body := []jen.Code{
		jen.Comment("setup builds the service (fixture " + r.Fixture + ") and its wrapper over a fresh database."),
		jen.Id("setup").Op(":=").Func().Params(jen.Id("t").Op("*").Qual("testing", "T")).Params(jen.Op("*").Id(tEnv), jen.Op("*").Id(r.Name), jen.Op("*").Id(r.Wrapper)).Block(
			jen.Id("env").Op(":=").Id(tNewEnv).Call(jen.Id("t")),
			jen.Id("svc").Op(":=").Id(r.Fixture).Call(jen.Id("t"), jen.Id("env").Dot("db")),
			countEffects,
			jen.Return(jen.Id("env"), jen.Id("svc"), jen.Id(r.Constructor).Call(jen.Id("svc"), jen.Id("env").Dot("store"))),
		),
	}
	body = append(body, subs...)
	return jen.Add(
		comment(fmt.Sprintf("%s checks the idempotency of %s against a real PostgreSQL: %s.", name, m.Key, strings.Join(checks, ", ")), effectsDoc).Line(),
		jen.Func().Id(name).Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(body...).Line(),
	)
}

// errOnly turns a wrapper call into an error expression.
func errOnly(m *Method, call *jen.Statement) jen.Code {
	if m.Result == nil {
		return call
	}
	return jen.Id("idemgenErr").Call(call)
}

// errOnlyAssign: _, err := call, or err := call for error-only methods.
func errOnlyAssign(m *Method, call *jen.Statement) jen.Code {
	if m.Result == nil {
		return jen.Err().Op(":=").Add(call)
	}
	return jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(call)
}

// changeRequest returns statements that turn the sample into another
// request, one fingerprinted scalar changed, and fail the test if the
// fingerprint did not change (a float too large to change by one, say).
//
//	before := fingerprintPaymentsCharge(req)
//	req.AmountCents++ // another request under the same key
//	if string(fingerprintPaymentsCharge(req)) == string(before) { t.Fatalf(...) }
func (e *emitter) changeRequest(m *Method, args []string) func() jen.Code {
	mu := m.Mutation
	return func() jen.Code {
		var ids []jen.Code
		for _, a := range args {
			ids = append(ids, jen.Id(a))
		}
		target := jen.Id(args[mu.Param])
		for _, p := range mu.Path {
			target = target.Dot(p)
		}
		var change *jen.Statement
		switch mu.Kind {
		case "string":
			change = target.Clone().Op("+=").Lit("-changed")
		case "bool":
			change = target.Clone().Op("=").Op("!").Add(target.Clone())
		case "float", "complex":
			// x*2 differs from x for every finite x but 0; x+1 may not
			// (a float32 of 1e8 plus one is the same value).
			change = jen.If(target.Clone().Op("==").Lit(0)).Block(target.Clone().Op("=").Lit(1)).Else().Block(target.Clone().Op("*=").Lit(2))
		default:
			change = target.Clone().Op("++")
		}
		fp := func() *jen.Statement { return jen.Id(m.FingerprintFunc).Call(ids...) }
		return jen.Comment("another request under the same key: one fingerprinted field changed").Line().
			Id("before").Op(":=").Add(fp()).Line().
			Add(change).Line().
			If(jen.String().Call(fp()).Op("==").String().Call(jen.Id("before"))).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit(fmt.Sprintf("changing %s left the request's fingerprint unchanged: give %s a value that changes (not NaN, an infinity or a float too large to double)",
				strings.Join(append([]string{args[mu.Param]}, mu.Path...), "."), m.SampleFixture))))
	}
}

// inTxTest: MInTx inside one caller transaction. The first call runs, a
// retry replays, another request is refused, and the transaction is still
// usable and commits the one row.
func (e *emitter) inTxTest(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code, ctxOf func(string, string) *jen.Statement) jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	call := func() *jen.Statement {
		return jen.Id("w").Dot(m.Name + "InTx").Call(append([]jen.Code{jen.Id("ctx"), jen.Id("tx")}, argIDs...)...)
	}
	must := func(lhs jen.Code, what string) []jen.Code {
		return []jen.Code{
			jen.List(lhs, jen.Err()).Op(":=").Add(call()),
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
	if m.Result != nil {
		body = append(body, must(jen.Id("first"), "first call")...)
		body = append(body, must(jen.Id("again"), "retry in the same transaction")...)
		body = append(body, jen.If(jen.Op("!").Qual("reflect", "DeepEqual").Call(jen.Id("first"), jen.Id("again"))).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("the retry returned %#v, the first call %#v: a replay must equal the original"), jen.Id("again"), jen.Id("first"))))
	} else {
		for _, what := range []string{"first call", "retry in the same transaction"} {
			body = append(body, jen.If(jen.Err().Op(":=").Add(call()), jen.Err().Op("!=").Nil()).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit(what+": %v"), jen.Err())))
		}
	}
	if m.Mutation != nil {
		body = append(body,
			e.changeRequest(m, args)(),
			jen.If(jen.Err().Op(":=").Add(errOnly(m, call())), jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrMismatch"))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("same key, different request: got error %v, want idem.ErrMismatch"), jen.Err())),
		)
	}
	body = append(body,
		jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("tx").Dot("Exec").Call(jen.Id("ctx"), jen.Lit("SELECT 1")), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("the caller's transaction is unusable after a refused claim: %v"), jen.Err())),
		jen.If(jen.Err().Op(":=").Id("tx").Dot("Commit").Call(jen.Id("ctx")), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("commit: %v"), jen.Err())),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), jen.Lit(m.Ledger), jen.Lit(1)),
	)
	return sub("in the caller's transaction", "Inside one caller transaction ("+m.Name+"InTx): a retry replays, another request is refused, and the transaction stays usable.", body...)
}

// finalErrorTests: per declared final error, a body that returns it through
// the method's own idem.Method. The error is stored (one ledger row), a retry
// through the wrapper replays it (errors.Is holds) and the body does not run
// again.
func (e *emitter) finalErrorTests(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code, ctxOf func(string, string) *jen.Statement, callW func(jen.Code) *jen.Statement) []jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	var out []jen.Code
	for _, fe := range m.FinalErrors {
		var run jen.Code
		if m.Mode == ModeAtomic {
			run = jen.Qual(idemPath, "Atomic").Call(jen.Id("ctx"), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
				jen.Id(m.FingerprintFunc).Call(argIDs...),
				jen.Func().Params(jen.Qual("context", "Context"), jen.Qual(pgxPath, "Tx")).Params(e.result(m), jen.Error()).Block(
					jen.Return(jen.Id("zero"), jen.Id(fe))))
		} else {
			run = jen.Qual(idemPath, "External").Call(jen.Id("ctx"), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
				jen.Id(m.FingerprintFunc).Call(argIDs...),
				jen.Func().Params(jen.Qual("context", "Context")).Params(e.result(m), jen.Error()).Block(
					jen.Return(jen.Id("zero"), jen.Id(fe))))
		}
		out = append(out, sub("final error "+fe, fmt.Sprintf("The declared final error %s is stored: a retry replays it (errors.Is holds) and does not run the method.", fe),
			jen.List(jen.Id("env"), jen.Id("_"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
			sample(),
			jen.Id("ctx").Op(":=").Add(ctxOf("final-"+fe, "")),
			jen.Var().Id("zero").Add(e.result(m)),
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(run),
			jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Id(fe))).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit("first attempt: got error %v, want "+fe), jen.Err())),
			jen.Err().Op("=").Add(errOnly(m, callW(jen.Id("ctx")))),
			jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Id(fe))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("retry after the final error: got error %v, want "+fe+" replayed"), jen.Err())),
			jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(1)),
			jen.Id("env").Dot("wantRows").Call(jen.Id("t"), jen.Lit(m.Ledger), jen.Lit(1)),
		))
	}
	return out
}

// inTxFailingTest: MInTx whose body does the work and then fails. The
// caller's transaction holds none of the work's writes nor the claim, stays
// usable, and commits the caller's own earlier work; a retry then runs.
func (e *emitter) inTxFailingTest(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code, ctxOf func(string, string) *jen.Statement, effects func(int) jen.Code) jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	exec := func(sql, what string) jen.Code {
		return jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("tx").Dot("Exec").Call(jen.Id("ctx"), jen.Lit(sql)), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit(what+": %v"), jen.Err()))
	}
	inner := jen.Id("svc").Dot(m.Name).Call(append([]jen.Code{jen.Id("ctx"), jen.Id("tx")}, argIDs...)...)
	return sub("failing body in the caller's transaction", "Inside one caller transaction ("+m.Name+"InTx), a body that does the work and then fails leaves none of it (nor the claim) in the transaction, which stays usable and commits the caller's own earlier work.",
		jen.List(jen.Id("env"), jen.Id("svc"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("in-tx-failing", "")),
		jen.List(jen.Id("tx"), jen.Err()).Op(":=").Id("env").Dot("db").Dot("Pool").Dot("Begin").Call(jen.Id("ctx")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Id("t").Dot("Fatalf").Call(jen.Lit("begin: %v"), jen.Err())),
		jen.Defer().Id("tx").Dot("Rollback").Call(jen.Id("ctx")).Comment("after Commit, a no-op"),
		exec("CREATE TABLE idemgen_caller_work (n int)", "the caller's own work"),
		exec("INSERT INTO idemgen_caller_work VALUES (1)", "the caller's own work"),
		jen.Var().Id("zero").Add(e.result(m)),
		jen.List(jen.Id("_"), jen.Err()).Op("=").Qual(idemPath, "AtomicInTx").Call(jen.Id("ctx"), jen.Id("env").Dot("store"), jen.Id("tx"), jen.Id(m.MethodVar),
			jen.Id(m.FingerprintFunc).Call(argIDs...),
			jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("tx").Qual(pgxPath, "Tx")).Params(e.result(m), jen.Error()).Block(
				jen.If(errOnlyAssign(m, inner), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("zero"), jen.Err())),
				jen.Return(jen.Id("zero"), jen.Id(tInjected)),
			)),
		jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Id(tInjected))).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("failing attempt: got error %v, want the injected failure"), jen.Err())),
		exec("INSERT INTO idemgen_caller_work VALUES (2)", "the caller's transaction is unusable after the failed body"),
		jen.If(jen.Err().Op(":=").Id("tx").Dot("Commit").Call(jen.Id("ctx")), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("commit: %v"), jen.Err())),
		jen.Var().Id("n").Int(),
		jen.If(jen.Err().Op(":=").Id("env").Dot("db").Dot("Pool").Dot("QueryRow").Call(jen.Id("ctx"), jen.Lit("SELECT count(*) FROM idemgen_caller_work")).Dot("Scan").Call(jen.Op("&").Id("n")),
			jen.Err().Op("!=").Nil().Op("||").Id("n").Op("!=").Lit(2)).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("the caller's own work: %d rows committed (err %v), want 2"), jen.Id("n"), jen.Err())),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), jen.Lit(m.Ledger), jen.Lit(0)),
		effects(0),
		jen.If(jen.Err().Op(":=").Add(errOnly(m, jen.Id("w").Dot(m.Name).Call(append([]jen.Code{jen.Id("ctx")}, argIDs...)...))), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("retry after the failed attempt: %v"), jen.Err())),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), jen.Lit(m.Ledger), jen.Lit(1)),
		effects(1),
	)
}

// effectFixtureName is the optional fixture that counts m's effects.
func effectFixtureName(m *Method) string { return "count" + m.Receiver + m.Name + "Effects" }

// externalCall returns idem.External(ctx, env.store, idemRM, fingerprintRM(args...), func(ctx) (R, error) { body })
// for the tests that drive an external method's attempts themselves.
func (e *emitter) externalCall(m *Method, argIDs []jen.Code, ctx string, body ...jen.Code) *jen.Statement {
	return jen.Qual(idemPath, "External").Call(jen.Id(ctx), jen.Id("env").Dot("store"), jen.Id(m.MethodVar),
		jen.Id(m.FingerprintFunc).Call(argIDs...),
		jen.Func().Params(jen.Id("ctx").Qual("context", "Context")).Params(e.result(m), jen.Error()).Block(body...))
}

// runInner returns the statements that run the service's own method inside an
// external attempt and return its answer:
//
//	return svc.Payout(ctx, req)
func runInner(m *Method, argIDs []jen.Code) jen.Code {
	inner := jen.Id("svc").Dot(m.Name).Call(append([]jen.Code{jen.Id("ctx")}, argIDs...)...)
	if m.Result != nil {
		return jen.Return(inner)
	}
	return jen.Return(jen.Id("zero"), inner)
}

// downstreamKeyTest: the same key sent after the retention window is a new
// request, so idem.DownstreamKey gives the new attempt a new key and the third
// party does not answer it with the old request's result.
//
//	if _, err := idem.External(ctx, ..., func(ctx) { firstKey = idem.DownstreamKey(ctx, "idemgen"); return svc.M(ctx, req) }); ...
//	env.clock.Advance(retention + time.Microsecond)
//	if _, err := idem.External(ctx, ..., func(ctx) { againKey = ...; ... }); ...
//	if firstKey == againKey { t.Errorf(...) }
func (e *emitter) downstreamKeyTest(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code, ctxOf func(string, string) *jen.Statement, retention *jen.Statement, retentionText string) jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	attempt := func(keyVar, what string) jen.Code {
		return jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(e.externalCall(m, argIDs, "ctx",
			jen.Id(keyVar).Op("=").Qual(idemPath, "DownstreamKey").Call(jen.Id("ctx"), jen.Lit("idemgen")),
			runInner(m, argIDs),
		)), jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit(what+": %v"), jen.Err()))
	}
	return sub("downstream key after the retention", fmt.Sprintf("The same key sent after %s is a new request: idem.DownstreamKey gives it a new downstream key, so a third party does not answer it with the first request's result.", retentionText),
		jen.List(jen.Id("env"), jen.Id("svc"), jen.Id("_")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("ctx").Op(":=").Add(ctxOf("downstream", "")),
		zeroIfNoResult(e, m),
		jen.Var().List(jen.Id("firstKey"), jen.Id("againKey")).String(),
		attempt("firstKey", "first request"),
		jen.Id("env").Dot("clock").Dot("Advance").Call(retention.Clone().Op("+").Qual("time", "Microsecond")),
		attempt("againKey", "the same key after its retention"),
		jen.If(jen.Id("firstKey").Op("==").Id("againKey")).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("DownstreamKey is %q before and after the retention, want a new key for the new request"), jen.Id("firstKey"))),
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
	)
}

// zeroIfNoResult declares var zero R where runInner returns it: for a method
// that returns only an error.
func zeroIfNoResult(e *emitter, m *Method) jen.Code {
	if m.Result != nil {
		return jen.Null()
	}
	return jen.Var().Id("zero").Add(e.result(m))
}

// lostLock is a test in which a first external attempt outlives its lock and
// a second claims the key while the first still works. The first then tries
// to finalise while the second holds the key, and must fail (idem.ErrLockLost).
type lostLock struct {
	name, doc, key string
	decls          []jen.Code // declarations both attempts use
	first          []jen.Code // the first attempt's body until it has outlived its lock
	second         []jen.Code // the second's body before it lets the first finish
	firstErr       string     // the failure when the first attempt finalised: a format for its error
	secondWhat     string     // the second attempt, in messages
	checks         []jen.Code // after both have finished
}

// zombie: an attempt outlives its lock and a retry takes the key over. The
// retry gets the same DownstreamKey and does not re-run a Step the first
// attempt recorded.
func (e *emitter) zombie(m *Method, lock *jen.Statement) lostLock {
	step := func(what string) jen.Code {
		return jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Qual(idemPath, "Step").Call(jen.Id("ctx"), jen.Lit("idemgen-step"),
			jen.Func().Params(jen.Qual("context", "Context")).Params(jen.Int64(), jen.Error()).Block(
				jen.Return(jen.Id("stepRuns").Dot("Add").Call(jen.Lit(1)), jen.Nil()))), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Id("zero"), jen.Qual("fmt", "Errorf").Call(jen.Lit(what+" step: %w"), jen.Err())))
	}
	return lostLock{
		name: "attempt that outlived its lock",
		doc:  "An attempt still working after its lock expired is taken over: the retry keeps its DownstreamKey and recorded Step, and the first attempt, finishing while the retry works, cannot finalise (idem.ErrLockLost).",
		key:  "zombie",
		decls: []jen.Code{
			jen.Var().Id("stepRuns").Qual("sync/atomic", "Int64"),
			jen.Var().List(jen.Id("firstKey"), jen.Id("takeoverKey")).String(),
		},
		first: []jen.Code{
			jen.Id("firstKey").Op("=").Qual(idemPath, "DownstreamKey").Call(jen.Id("ctx"), jen.Lit("idemgen")),
			step("first attempt's"),
			jen.Id("env").Dot("clock").Dot("Advance").Call(lock.Clone().Op("+").Qual("time", "Second")).Comment("this attempt outlives its lock"),
		},
		second: []jen.Code{
			jen.Id("takeoverKey").Op("=").Qual(idemPath, "DownstreamKey").Call(jen.Id("ctx"), jen.Lit("idemgen")),
			step("takeover's"),
		},
		firstErr:   "the attempt that outlived its lock finished with error %v, want idem.ErrLockLost",
		secondWhat: "takeover",
		checks: []jen.Code{
			jen.If(jen.Id("firstKey").Op("!=").Id("takeoverKey")).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("DownstreamKey changed across the takeover: %q, then %q"), jen.Id("firstKey"), jen.Id("takeoverKey"))),
			jen.If(jen.Id("n").Op(":=").Id("stepRuns").Dot("Load").Call(), jen.Id("n").Op("!=").Lit(1)).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("a Step recorded before the takeover ran %d times, want 1"), jen.Id("n"))),
		},
	}
}

// sweptZombie: an attempt outlives its lock and its retention, its row is
// swept and the key claimed anew. The new claim's fence starts again; the
// stale attempt still cannot finalise.
func sweptZombie(lock, retention *jen.Statement) lostLock {
	return lostLock{
		name: "stale attempt after a sweep",
		doc:  "An attempt still working after its lock and its retention ended, its row swept and the key claimed anew, cannot finalise while the new claim works (idem.ErrLockLost): fences never repeat for a key.",
		key:  "stale",
		first: []jen.Code{
			jen.Id("env").Dot("clock").Dot("Advance").Call(retention.Clone().Op("+").Add(lock.Clone()).Op("+").Qual("time", "Second")).Comment("this attempt outlives its lock and its retention"),
			jen.If(jen.List(jen.Id("n"), jen.Err()).Op(":=").Id("env").Dot("store").Dot("Sweep").Call(jen.Id("ctx"), jen.Lit(0)), jen.Err().Op("!=").Nil().Op("||").Id("n").Op("!=").Lit(1)).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("a sweep after the stale attempt's retention deleted %d rows (err %v), want 1"), jen.Id("n"), jen.Err())),
		},
		firstErr:   "the stale attempt finished after a sweep with error %v, want idem.ErrLockLost",
		secondWhat: "new claim",
	}
}

// lostLockTest emits a lostLock test. The first attempt runs in a goroutine
// and waits, after it outlived its lock, until the second attempt's body lets
// it finish; the second waits in its body until the first has finished.
//
//	go func() { defer close(finished); _, err = idem.External(outer, ..., func(ctx) { ...; close(outlived); <-finish; return zero, nil }) }()
//	<-outlived
//	takeover, takeoverErr := idem.External(outer, ..., func(ctx) { ...; release(); <-finished; return svc.M(ctx, req) })
//	if !errors.Is(err, idem.ErrLockLost) { t.Errorf(...) }
func (e *emitter) lostLockTest(m *Method, args []string, sub func(string, string, ...jen.Code) jen.Code, sample func() jen.Code, ctxOf func(string, string) *jen.Statement, callW func(jen.Code) *jen.Statement, l lostLock) jen.Code {
	var argIDs []jen.Code
	for _, a := range args {
		argIDs = append(argIDs, jen.Id(a))
	}
	first := append(append([]jen.Code{}, l.first...),
		jen.Id("close").Call(jen.Id("outlived")),
		jen.Op("<-").Id("finish").Comment("it finishes while the "+l.secondWhat+" holds the key"),
		jen.Return(jen.Id("zero"), jen.Nil()),
	)
	second := append(append([]jen.Code{}, l.second...),
		jen.Id("release").Call(),
		jen.Op("<-").Id("finished").Comment("the first attempt tries to finalise while this one holds the key"),
		runInner(m, argIDs),
	)
	secondID := jen.Id("_")
	if m.Result != nil {
		secondID = jen.Id("takeover")
	}
	replay := jen.If(jen.Err().Op(":=").Add(callW(jen.Id("outer"))), jen.Err().Op("!=").Nil()).Block(
		jen.Id("t").Dot("Errorf").Call(jen.Lit("retry after the "+l.secondWhat+" finished: %v"), jen.Err()))
	if m.Result != nil {
		replay = jen.List(jen.Id("again"), jen.Err()).Op(":=").Add(callW(jen.Id("outer"))).Line().
			If(jen.Err().Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("retry after the "+l.secondWhat+" finished: %v"), jen.Err())).Line().
			If(jen.Op("!").Qual("reflect", "DeepEqual").Call(jen.Id("again"), jen.Id("takeover"))).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit("the retry replayed %#v, the "+l.secondWhat+" returned %#v: the attempt that lost its lock overwrote the answer"), jen.Id("again"), jen.Id("takeover")))
	}
	body := []jen.Code{
		jen.List(jen.Id("env"), jen.Id("svc"), jen.Id("w")).Op(":=").Id("setup").Call(jen.Id("t")),
		sample(),
		jen.Id("outer").Op(":=").Add(ctxOf(l.key, "")),
		jen.Var().Id("zero").Add(e.result(m)),
	}
	body = append(body, l.decls...)
	body = append(body,
		jen.List(jen.Id("outlived"), jen.Id("finish"), jen.Id("finished")).Op(":=").List(
			jen.Make(jen.Chan().Struct()), jen.Make(jen.Chan().Struct()), jen.Make(jen.Chan().Struct())),
		jen.Id("release").Op(":=").Qual("sync", "OnceFunc").Call(jen.Func().Params().Block(jen.Id("close").Call(jen.Id("finish")))),
		jen.Var().Err().Error(),
		jen.Go().Func().Params().Block(
			jen.Defer().Id("close").Call(jen.Id("finished")),
			jen.List(jen.Id("_"), jen.Err()).Op("=").Add(e.externalCall(m, argIDs, "outer", first...)),
		).Call(),
		jen.Select().Block(
			jen.Case(jen.Op("<-").Id("outlived")),
			jen.Case(jen.Op("<-").Id("finished")).Block(
				jen.Id("t").Dot("Fatalf").Call(jen.Lit("the first attempt ended before it outlived its lock: %v"), jen.Err())),
		),
		jen.List(secondID, jen.Id("takeoverErr")).Op(":=").Add(e.externalCall(m, argIDs, "outer", second...)),
		jen.Id("release").Call().Comment("in case the "+l.secondWhat+" never ran its body"),
		jen.Op("<-").Id("finished"),
		jen.If(jen.Op("!").Qual("errors", "Is").Call(jen.Err(), jen.Qual(idemPath, "ErrLockLost"))).Block(
			jen.Id("t").Dot("Errorf").Call(jen.Lit(l.firstErr), jen.Err())),
		jen.If(jen.Id("takeoverErr").Op("!=").Nil()).Block(
			jen.Id("t").Dot("Fatalf").Call(jen.Lit("the "+l.secondWhat+": %v"), jen.Id("takeoverErr"))),
	)
	body = append(body, l.checks...)
	body = append(body,
		replay,
		jen.Id("env").Dot("wantExecutions").Call(jen.Id("t"), jen.Lit(2)),
		jen.Id("env").Dot("wantRows").Call(jen.Id("t"), jen.Lit(m.Ledger), jen.Lit(1)),
	)
	return sub(l.name, l.doc, body...)
}
