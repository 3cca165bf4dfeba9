package migrations

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/stamp"
)

// writtenOf is the record a run that wrote files leaves in its stamp.
func writtenOf(files map[string][]byte) map[string]string {
	w := map[string]string{}
	for n, b := range owned(files) {
		w[n] = stamp.FileSum(b)
	}
	return w
}

func without(dir map[string][]byte, names ...string) map[string][]byte {
	m := maps.Clone(dir)
	for _, n := range names {
		delete(m, n)
	}
	return m
}

// named returns the one file of dir whose name contains part.
func named(t *testing.T, dir map[string][]byte, part string) string {
	t.Helper()
	var found []string
	for n := range dir {
		if strings.Contains(n, part) {
			found = append(found, n)
		}
	}
	require.Len(t, found, 1, "files named *%s*", part)
	return found[0]
}

func problemOf(t *testing.T, err error) Problem {
	t.Helper()
	var pe *ProblemError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Problems, 1)
	return pe.Problems[0]
}

// TestDeletedMigrationIsWrittenBackInPlace: in every format, any one
// generated file deleted from the inline scenario (a ledger, columns added
// to a business table, their concurrent index) comes back under its own
// name, byte for byte, and nothing else changes.
func TestDeletedMigrationIsWrittenBackInPlace(t *testing.T) {
	for _, format := range Formats() {
		dir := inlineScenario(t, format)
		cfg := inlineCfg(format)
		cfg.Written = writtenOf(dir)
		for _, name := range slices.Sorted(maps.Keys(owned(dir))) {
			if name == AtlasSumFile {
				continue
			}
			t.Run(format+"/"+name, func(t *testing.T) {
				out, err := Plan(cfg, without(dir, name))
				require.NoError(t, err)
				want := owned(dir)
				require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(out)), "the deleted file comes back under its name; no other is added")
				for n := range want {
					assert.Equal(t, string(want[n]), string(out[n]), "%s is as idemgen wrote it", n)
				}
			})
		}
	}
}

// TestMovedMigrationIsNotWrittenBack: a generated file renumbered by hand
// (after a merge gave two files one version, say) still creates what it
// did: nothing is written back under the old name, and the set applies.
func TestMovedMigrationIsNotWrittenBack(t *testing.T) {
	dir := inlineScenario(t, "goose")
	cfg := inlineCfg("goose")
	cfg.Written = writtenOf(dir)
	ix := named(t, dir, "_idemgen_index_payments")
	require.True(t, strings.HasPrefix(ix, "20240101120003_"), ix)
	moved := without(dir, ix)
	moved["20240101120009"+strings.TrimPrefix(ix, "20240101120003")] = dir[ix]
	out, err := Plan(cfg, moved)
	require.NoError(t, err)
	assert.Equal(t, slices.Sorted(maps.Keys(owned(moved))), slices.Sorted(maps.Keys(out)))
}

// TestDeletedMigrationWithoutRecordIsRefused: with no stamp listing it, a
// deleted column migration would be planned after the index that needs its
// columns; Plan refuses and names the index migration.
func TestDeletedMigrationWithoutRecordIsRefused(t *testing.T) {
	dir := inlineScenario(t, "goose")
	cols, ix := named(t, dir, "_idemgen_inline_payments"), named(t, dir, "_idemgen_index_payments")
	later := "20240101120004_idemgen_inline_payments.sql"
	_, err := Plan(inlineCfg("goose"), without(dir, cols))
	p := problemOf(t, err)
	assert.Equal(t, Unordered, p.Kind)
	assert.Equal(t, ix, p.File)
	assert.Equal(t, "migrations/"+ix+": cannot apply: it builds index payments_idempotency_key_idx on payments, but no migration before it adds column idempotency_scope (idemgen would add it in a new "+later+", after it). A migration that idemgen wrote before this one has been deleted: "+
		"restore it from version control (git log --diff-filter=D --name-only -- migrations names it); existing migrations are never rewritten or renumbered (they may have been applied already), so idemgen will not put it back before "+ix+" itself.",
		p.Message("migrations"))

	// The ledger's creation deleted while its index migration stays: the
	// index would precede the table.
	dir = scenarios(t, "goose")["evolved"]
	_, err = Plan(cfgFor("goose"), without(dir, named(t, dir, "_idemgen_create_idempotency_keys")))
	p = problemOf(t, err)
	assert.Equal(t, Unordered, p.Kind)
	assert.Contains(t, p.Reason, "which no migration before it creates")
}

// TestDeletedMigrationThatCannotComeBackIsRefused: when what the other
// files lack would take other names (here a second inline table asks for
// migrations of its own), Plan names the missing file and writes nothing.
func TestDeletedMigrationThatCannotComeBackIsRefused(t *testing.T) {
	dir := inlineScenario(t, "goose")
	cfg := inlineCfg("goose")
	cfg.Written = writtenOf(dir)
	cfg.Inline = append(cfg.Inline, InlineTable{Table: "orders", Methods: []string{"Orders.Place"}})
	cols := named(t, dir, "_idemgen_inline_payments")
	_, err := Plan(cfg, without(dir, cols))
	p := problemOf(t, err)
	assert.Equal(t, Missing, p.Kind)
	assert.Equal(t, cols, p.File)
	msg := p.Message("migrations")
	assert.True(t, strings.HasPrefix(msg, "migrations/"+cols+": missing, and idemgen cannot write it back where it was: "), msg)
	assert.Contains(t, msg, "Restore it from version control (git checkout -- migrations/"+cols+")")

	// The ledger created by an older idemgen, then altered: planned from
	// the other files, its creation would hold the added column too, which
	// is not what databases that applied it ran. Refused, not rewritten.
	dir = scenarios(t, "goose")["evolved"]
	cfg = cfgFor("goose")
	cfg.Written = writtenOf(dir)
	create := named(t, dir, "_idemgen_create_idempotency_keys")
	_, err = Plan(cfg, without(dir, create))
	p = problemOf(t, err)
	assert.Equal(t, Missing, p.Kind)
	assert.Equal(t, create, p.File)
	assert.Contains(t, p.Reason, "would not hold what idemgen wrote there before")
}

// TestHandEditedMigrationIsRefused: an edit is never accepted: Plan names
// the file, keeps what idemgen wrote for the diff, and writes nothing.
func TestHandEditedMigrationIsRefused(t *testing.T) {
	dir := inlineScenario(t, "goose")
	cfg := inlineCfg("goose")
	cfg.Written = writtenOf(dir)
	cols := named(t, dir, "_idemgen_inline_payments")
	edited := maps.Clone(dir)
	edited[cols] = []byte(strings.Replace(string(dir[cols]), "ADD COLUMN IF NOT EXISTS", "ADD COLUMN", 1))
	_, err := Plan(cfg, edited)
	p := problemOf(t, err)
	assert.Equal(t, Edited, p.Kind)
	assert.Equal(t, cols, p.File)
	assert.Equal(t, string(edited[cols]), string(p.Have))
	assert.Equal(t, string(dir[cols]), string(p.Want), "what idemgen wrote, reproduced")
	assert.Equal(t, "migrations/"+cols+": hand-edited (differs from what idemgen wrote). Restore it (git checkout -- migrations/"+cols+") and put your schema change in a new migration of your own: existing migrations are never rewritten or renumbered (they may have been applied already).",
		p.Message("migrations"))

	// Without a recorded sum (a stamp older than the sums) nothing can tell.
	cfg.Written = map[string]string{cols: ""}
	_, err = Plan(cfg, edited)
	require.NoError(t, err)
}
