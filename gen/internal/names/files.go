// Package names is the one naming table of the generator: every identifier
// and file name the generated code declares or the user is asked to write
// (wrappers, guards, fingerprint functions and helpers, fixtures, tests) is
// spelled here, by pure functions of the model, and made unique within a
// package by one Namer. Analysis (which checks the fixtures by name) and both
// emitters ask this package; none of them builds a name itself.
package names

import "github.com/idemgen/idemgen/gen/stamp"

// Output file names, beside the package's sources. GoFile carries the stamp.
const (
	GoFile   = stamp.GoFile
	TestFile = "idem_gen_test.go"
)
