// Package effectscorpus is the effect analysis's corpus: annotated methods
// written the way users write them, with the ORMs, SDKs, stores, loggers,
// metrics, tracing, identifiers and HTTP packages they use beside
// PostgreSQL, each judged accepted or refused (its "Expect:" line). The
// test runs the three runners on every case (the generator, idemvet on
// its own and go vet -vettool) and checks their verdicts against it.
//
// The cases are under testdata, so that the module's ./..., which CI vets
// with idemvet, does not hold the refused ones; deps.go names the
// libraries they import for go mod tidy. It is a module of its own so
// that the root go.mod never requires them.
package effectscorpus
