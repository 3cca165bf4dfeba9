package pglocal

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartStop starts a real server, runs a query on it, stops it, and
// checks that nothing is left behind.
func TestStartStop(t *testing.T) {
	s, err := Start(t.Context())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Stop()
		}
	})

	conn, err := pgx.Connect(t.Context(), s.URL)
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT 1").Scan(&one))
	assert.Equal(t, 1, one)
	require.NoError(t, conn.Close(t.Context()))

	require.NoError(t, s.Stop())
	stopped = true
	select {
	case <-s.exited:
	default:
		t.Error("the postmaster is still running after Stop")
	}
	_, err = os.Stat(s.Dir)
	assert.True(t, os.IsNotExist(err), "the server directory %s is left behind: %v", s.Dir, err)
}
