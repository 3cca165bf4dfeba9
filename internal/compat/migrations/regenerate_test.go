package migrations_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// exampleModule copies the example package into a fresh module, builds
// idemgen there and generates the package once, as a user who vendored the
// example would. It returns the module and the idemgen binary.
// With fresh, the example's generated files are left out, so its first run
// writes every migration with today's templates; without, the committed
// history (written by the templates of its day, the ledger altered since)
// is kept.
func exampleModule(t *testing.T, fresh bool) (dir, idemgen string) {
	t.Helper()
	files := testmod.ExampleFiles(t)
	if fresh {
		files = testmod.FreshExampleFiles(t)
	}
	dir = testmod.New(t, "shop", files)
	idemgen = filepath.Join(t.TempDir(), "idemgen")
	cmd := exec.Command("go", "build", "-o", idemgen, "github.com/idemgen/idemgen/cmd/idemgen")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build idemgen: %s", out)
	code, stdout, stderr := runIdemgen(t, dir, idemgen)
	require.Equal(t, 0, code, "idemgen: %s%s", stdout, stderr)
	return dir, idemgen
}

func runIdemgen(t *testing.T, dir, idemgen string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(idemgen, append(args, "./example")...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	require.NoError(t, err)
	return 0, stdout.String(), stderr.String()
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestDeletedMigrationRegeneratesToASetThatApplies is the report in full:
// delete the example's inline-columns migration, run idemgen again, apply
// the whole directory with goose to a fresh database. Before, idemgen wrote
// the columns as 00006, after the index migration 00004 that needs them,
// and goose failed with column "idempotency_key" does not exist. Now the
// file comes back under its own name, byte for byte, and the set applies.
func TestDeletedMigrationRegeneratesToASetThatApplies(t *testing.T) {
	dir, idemgen := exampleModule(t, true)
	mig := filepath.Join(dir, "example", "migrations")
	before := listDir(t, mig)
	const cols = "00003_idemgen_inline_payments.sql"
	orig, err := os.ReadFile(filepath.Join(mig, cols))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(mig, cols)))

	code, stdout, stderr := runIdemgen(t, dir, idemgen)
	require.Equal(t, 0, code, "idemgen: %s", stderr)
	assert.Contains(t, stdout, "wrote migrations/"+cols)
	assert.Equal(t, before, listDir(t, mig), "the same files, no new number")
	back, err := os.ReadFile(filepath.Join(mig, cols))
	require.NoError(t, err)
	assert.Equal(t, string(orig), string(back), "written back byte for byte")

	ctx := context.Background()
	db := idemtest.New(t, idemtest.WithoutLedger())
	applied, err := gooseProvider(t, db.URL, mig).Up(ctx)
	require.NoError(t, err, "goose up on a fresh database")
	require.Len(t, applied, len(before))
	var valid bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'payments_idempotency_key_idx'::regclass`).Scan(&valid))
	assert.True(t, valid, "the inline key index is built over the restored columns")
	code, stdout, stderr = runIdemgen(t, dir, idemgen, "-check")
	assert.Equal(t, 0, code, "-check after the restore: %s%s", stdout, stderr)

	// The control: the set as idemgen wrote it before, the columns as
	// 00006, fails on a fresh database, so the apply above can fail.
	old := map[string][]byte{}
	for _, name := range before {
		b, err := os.ReadFile(filepath.Join(mig, name))
		require.NoError(t, err)
		if name == cols {
			name = "00006_idemgen_inline_payments.sql"
		}
		old[name] = b
	}
	_, err = gooseProvider(t, idemtest.New(t, idemtest.WithoutLedger()).URL, writeDir(t, old)).Up(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `column "idempotency_key" does not exist`)
}

// TestDeletedMigrationThatCannotComeBackIsRefused: the example's ledger was
// created by an older idemgen and altered since (00005 adds a column).
// Written back from the other files, its creation would hold that column
// too, which is not what the databases that applied it ran, so idemgen
// refuses, names the file and writes nothing. Without the stamp's record
// (its name unknown) the index migration that would run before its columns
// is named instead.
func TestDeletedMigrationThatCannotComeBackIsRefused(t *testing.T) {
	dir, idemgen := exampleModule(t, false)
	mig := filepath.Join(dir, "example", "migrations")
	const create = "00002_idemgen_create_idempotency_keys.sql"
	require.NoError(t, os.Remove(filepath.Join(mig, create)))
	before := listDir(t, mig)

	code, _, stderr := runIdemgen(t, dir, idemgen)
	assert.Equal(t, 1, code)
	assert.Equal(t, "example/migrations/"+create+": missing, and idemgen cannot write it back where it was: written back from the other files, "+create+
		" would not hold what idemgen wrote there before (a later migration changed its table, or this idemgen writes it differently). Restore it from version control (git checkout -- example/migrations/"+create+
		"): existing migrations are never rewritten or renumbered (they may have been applied already).\n", stderr)
	assert.Equal(t, before, listDir(t, mig), "nothing written")

	stampGo := filepath.Join(dir, "example", "idem_gen.go")
	src, err := os.ReadFile(stampGo)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(stampGo, bytes.Replace(src, []byte(" migrations/"+create+"@"), []byte(" migrations/x"+create+"@"), 1), 0o644))
	code, _, stderr = runIdemgen(t, dir, idemgen)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "example/migrations/00005_idemgen_alter_idempotency_keys.sql: cannot apply: it changes table idempotency_keys, which no migration before it creates")
	assert.True(t, slices.Equal(before, listDir(t, mig)), "nothing written")
}
