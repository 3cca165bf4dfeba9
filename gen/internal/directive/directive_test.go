package directive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	d, problems := Parse([]string{"-retention=48h", "-final-errors=ErrA, ErrB", "-lock-timeout", "30s", "-tests=false", "-storm=8", "-table=billing.keys"})
	require.Empty(t, problems)
	assert.Equal(t, 48*time.Hour, d.Retention)
	assert.Equal(t, 30*time.Second, d.LockTimeout)
	assert.Equal(t, []string{"ErrA", "ErrB"}, d.FinalErrors)
	assert.False(t, d.Tests)
	assert.Equal(t, 8, d.Storm)
	assert.True(t, d.IsSet("table"))
	assert.False(t, d.IsSet("mode"))

	_, problems = Parse([]string{"-retention=0s", "-mode=x", "-storm=1", "-tests=maybe", "-migration-format=flyway", "-final-errors=A,,B", "-nope", "-v", "-v", "pos", "-table"})
	assert.Equal(t, []string{
		"-retention=0s: want a positive duration such as 48h or 90s",
		"-mode=x: want auto, atomic or external",
		"-storm=1: want a number of concurrent requests between 2 and 1024",
		"-tests=maybe: want true or false",
		"-migration-format=flyway: want one of goose, golang-migrate, tern, dbmate, atlas, plain",
		"-final-errors=A,,B: want a comma-separated list of package-level error variables, e.g. ErrCardDeclined,ErrInsufficientFunds",
		"unknown flag -nope (known: -mode, -inline, -lookup, -key, -final-errors, -retention, -lock-timeout, -table, -migrations, -migration-format, -distributed, -tests, -storm, -tags, -v, -debug-model)",
		"flag -v is given twice",
		`unexpected argument "pos": a directive takes only flags, e.g. -retention=48h`,
		"flag -table needs a value",
	}, problems)

	_, problems = Parse([]string{"-retention=30s"})
	assert.Equal(t, []string{"-retention=30s: want at least 1m: a shorter window turns a client's retry into a new request"}, problems)
	_, problems = Parse([]string{"-retention=1m", "-lock-timeout=10m"})
	assert.Equal(t, []string{"-lock-timeout=10m is longer than -retention=1m: a call still holding its key would be treated as new when the window ends; make -retention at least the lock timeout"}, problems)
	_, problems = Parse([]string{"-retention=10m", "-lock-timeout=10m"})
	assert.Empty(t, problems)
}
