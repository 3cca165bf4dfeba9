package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/postgres"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen/migrations"
)

// atlasUp applies dir with atlas's own migration library (ariga.io/atlas
// sql/migrate): it validates atlas.sum the way atlas migrate apply does,
// splits every file into statements with atlas's lexer and runs each file
// the way the atlas CLI does, in one transaction unless the file says
// atlas:txmode none. Revisions are kept in memory.
func atlasUp(t *testing.T, ctx context.Context, dbURL, path string) error {
	t.Helper()
	dir, err := migrate.NewLocalDir(path)
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(path, migrations.AtlasSumFile)); err == nil {
		if err := migrate.Validate(dir); err != nil {
			return err
		}
	}
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	defer db.Close()
	files, err := dir.Files()
	require.NoError(t, err)
	revs := &memRevisions{}
	for _, f := range files {
		if err := atlasExecute(ctx, db, dir, revs, f); err != nil {
			return err
		}
	}
	return nil
}

func atlasExecute(ctx context.Context, db *sql.DB, dir migrate.Dir, revs *memRevisions, f migrate.File) error {
	noTx := slices.Contains(f.(*migrate.LocalFile).Directive("txmode"), "none")
	if noTx {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		drv, err := postgres.Open(conn)
		if err != nil {
			return err
		}
		ex, err := migrate.NewExecutor(drv, dir, revs, migrate.WithAllowDirty(true))
		if err != nil {
			return err
		}
		return ex.Execute(ctx, f)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	drv, err := postgres.Open(tx)
	if err != nil {
		return err
	}
	ex, err := migrate.NewExecutor(drv, dir, revs, migrate.WithAllowDirty(true))
	if err != nil {
		return err
	}
	if err := ex.Execute(ctx, f); err != nil {
		return err
	}
	return tx.Commit()
}

// memRevisions is an in-memory migrate.RevisionReadWriter.
type memRevisions struct {
	mu   sync.Mutex
	revs []*migrate.Revision
}

func (m *memRevisions) Ident() *migrate.TableIdent {
	return &migrate.TableIdent{Name: "atlas_schema_revisions"}
}

func (m *memRevisions) ReadRevisions(context.Context) ([]*migrate.Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.revs), nil
}

func (m *memRevisions) ReadRevision(_ context.Context, v string) (*migrate.Revision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.revs {
		if r.Version == v {
			return r, nil
		}
	}
	return nil, migrate.ErrRevisionNotExist
}

func (m *memRevisions) WriteRevision(_ context.Context, r *migrate.Revision) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, old := range m.revs {
		if old.Version == r.Version {
			m.revs[i] = r
			return nil
		}
	}
	m.revs = append(m.revs, r)
	return nil
}

func (m *memRevisions) DeleteRevision(_ context.Context, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revs = slices.DeleteFunc(m.revs, func(r *migrate.Revision) bool { return r.Version == v })
	return nil
}

// TestAtlasValidatesTheSum checks atlas.sum with atlas's own code, and that
// the check is real: a file changed after hashing is refused.
func TestAtlasValidatesTheSum(t *testing.T) {
	for name, files := range scenarios(t, "atlas") {
		t.Run(name, func(t *testing.T) {
			path := writeDir(t, files)
			dir, err := migrate.NewLocalDir(path)
			require.NoError(t, err)
			require.NoError(t, migrate.Validate(dir), "atlas accepts atlas.sum")

			for n := range files {
				if filepath.Ext(n) == ".sql" {
					require.NoError(t, os.WriteFile(filepath.Join(path, n), append(files[n], "-- edited\n"...), 0o644))
					break
				}
			}
			require.True(t, errors.Is(migrate.Validate(dir), migrate.ErrChecksumMismatch), "an edited file breaks the sum")
		})
	}
}
