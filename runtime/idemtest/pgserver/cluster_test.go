package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCluster starts a primary with a synchronous standby, writes on the
// primary and reads the row on the standby, kills the primary, promotes the
// standby, and writes through the cluster's multi-host URL.
func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, ClusterConfig{Standbys: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close())
		for _, s := range c.Servers() {
			assert.NoDirExists(t, s.Dir())
		}
	})
	require.Len(t, c.Standbys, 1)
	standby := c.Standbys[0]
	assert.Equal(t, []*Server{c.Primary, standby}, c.Servers())
	assert.Equal(t, "standby", standby.Name())
	assert.True(t, query[bool](t, standby.URL("postgres"), "SELECT pg_is_in_recovery()"))

	require.NoError(t, c.Synchronous(ctx, "remote_apply"))
	assert.Equal(t, "remote_apply", query[string](t, c.Primary.URL("postgres"), "SHOW synchronous_commit"))
	require.NoError(t, c.Primary.Exec(ctx, "CREATE TABLE t (v int)", "INSERT INTO t VALUES (1)"))
	require.NoError(t, c.WaitReplayed(ctx))
	assert.Equal(t, 1, query[int](t, standby.URL("postgres"), "SELECT v FROM t"))

	require.NoError(t, c.Primary.Kill(ctx))
	require.NoError(t, standby.Promote(ctx))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (2)")
	require.NoError(t, err, "the multi-host URL reaches the promoted standby")
	var port int
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port))
	assert.Equal(t, standby.Port(), port)
}
