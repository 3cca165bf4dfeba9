// Package effects finds the calls an idempotent method makes that the
// database transaction it runs in cannot undo: an HTTP request, an RPC, a
// published message, a mail, a process, a write through another database
// handle or to a file. A retry after a failed commit repeats them.
//
// Analyzer is the check one package at a time, for go vet-style runs
// (idemvet's effects check). The generator runs the same walk over the
// whole program before it writes (Load, then Program.Check). Both are
// implemented in internal/effectwalk, which the generator's stage and this
// package share; see its documentation for what is walked, what is not,
// and what can be missed. The names below are that package's.
package effects

import (
	"context"

	"github.com/idemgen/idemgen/internal/effectwalk"
)

// Analyzer is the effect check as a go/analysis analyzer, one package at
// a time; see effectwalk.Analyzer.
var Analyzer = effectwalk.Analyzer

// The analyzer's fact and the catalogue.
type (
	// Reaches is the fact a function exports: the catalogued calls it
	// reaches.
	Reaches = effectwalk.Reaches
	// Reached is one catalogued call a function reaches.
	Reached = effectwalk.Reached
	// Kind is the family of an effect, for messages.
	Kind = effectwalk.Kind
	// Entry is one line of the effect catalogue.
	Entry = effectwalk.Entry
)

// The whole-program walk, as the generator runs it.
type (
	// Config says which program to load.
	Config = effectwalk.Config
	// Program is a loaded program in SSA form.
	Program = effectwalk.Program
	// Method names an annotated method to check.
	Method = effectwalk.Method
	// Report is what Program.Check found for one method.
	Report = effectwalk.Report
	// Finding is one catalogued call a method reaches.
	Finding = effectwalk.Finding
	// Hop is one function of a finding's path.
	Hop = effectwalk.Hop
	// Problem is an //idem:effect-ok comment without a reason.
	Problem = effectwalk.Problem
)

// The kinds of effect the catalogue names.
const (
	KindHTTP     = effectwalk.KindHTTP
	KindNet      = effectwalk.KindNet
	KindRPC      = effectwalk.KindRPC
	KindMail     = effectwalk.KindMail
	KindProcess  = effectwalk.KindProcess
	KindBroker   = effectwalk.KindBroker
	KindAWS      = effectwalk.KindAWS
	KindDatabase = effectwalk.KindDatabase
	KindFile     = effectwalk.KindFile
	KindStore    = effectwalk.KindStore
)

// OKDirective marks an effect as safe to repeat, with its reason.
const OKDirective = effectwalk.OKDirective

// Catalogue returns the effect catalogue; see effectwalk.Catalogue.
func Catalogue() []Entry { return effectwalk.Catalogue() }

// Load loads the program cfg names for the whole-program walk; see
// effectwalk.Load.
func Load(ctx context.Context, cfg Config) (*Program, error) { return effectwalk.Load(ctx, cfg) }
