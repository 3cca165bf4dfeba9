// Package gen is idemgen's library entry point, a facade over the
// generator's stages: Generate (with Config and Output) runs them in
// memory, WriteFile writes what they produced, and the model and its errors
// are re-exported (type aliases) for the command and the tests.
//
// The generator flows one way, load → analyze → ir → emit, and each
// decision has one owner, one package:
//
//	gen/internal/load       go/packages, the -overlay hiding idemgen's own files, build tags
//	gen/internal/directive  finding and parsing //go:generate idemgen lines (the only place)
//	gen/internal/analyze    signatures and modes, the fingerprint plan, the JSON round trip,
//	                        fixtures, inline mode, ledger names: the model plus errors with positions
//	gen/ir                  the model: plain data, what a method is, not how it is printed
//	gen/internal/names      every generated identifier and fixture name, made unique per package
//	gen/internal/golang     idem_gen.go and its doc prose; the rendering helpers the tests share
//	gen/internal/gotest     idem_gen_test.go: one idemtest suite literal per method
//	gen/internal/diag       errors at positions, printed compiler-style
//	gen/migrations          the SQL migrations; gen/stamp: the input and output stamp
//
// The names follow what the pieces are rather than the tools they use:
// "analyze" returns facts and refuses code, it builds nothing; "ir" is the
// intermediate form both emitters read (the name mockgen and sqlc's compiler
// give theirs); "golang" and "gotest" are backends named by what they print,
// as sqlc's codegen/golang, so a second backend (database/sql, gRPC) sits
// beside them. Naming is a table apart from both analysis and printing
// because both need it: analysis checks the fixtures the generated tests
// call, by name, and the two emitters must agree on every identifier.
//
// The layering is a test (layers_test.go): go list -deps shows that ir and
// names reach no go/types, x/tools or jennifer, that the emitters reach no
// go/types or x/tools, and that each stage imports only those before it; no
// function in gen/ is longer than 100 lines; and no string literal outside
// names builds a generated identifier. The golden cases keep each model
// (model.json, ModelJSON) beside the files printed from it.
package gen
