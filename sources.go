// Package idemgen holds the generator's own sources, embedded so that every
// build of the same generator code (go install, go tool, go run, a test
// binary) stamps its output with the same identity; see gen/stamp.
//
// The generator itself is the idemgen command (cmd/idemgen) over the gen
// package; services use the runtime packages under runtime/.
package idemgen

import "embed"

// GeneratorSources are the Go files whose code decides what idemgen emits:
// the gen package, its model (gen/ir), its internal stages (gen/internal/...),
// its migration planner, the stamp package, the effect walk it runs before
// writing (internal/effectwalk, internal/overlay) and the generated-file
// header (internal/genheader). Test files are embedded too (an embed
// pattern cannot leave them out); gen/stamp skips them when it hashes. A
// new package under gen/ must be added to the patterns;
// TestGeneratorSourcesCoverGen in gen/stamp fails until it is.
//
//go:embed gen/*.go gen/ir/*.go gen/internal/*/*.go gen/migrations/*.go gen/stamp/*.go internal/effectwalk/*.go internal/overlay/*.go internal/genheader/*.go
var GeneratorSources embed.FS
