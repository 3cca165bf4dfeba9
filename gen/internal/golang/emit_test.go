package golang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormatDuration(t *testing.T) {
	assert.Equal(t, "48h", formatDuration(48*time.Hour))
	assert.Equal(t, "1h30m", formatDuration(90*time.Minute))
	assert.Equal(t, "5m", formatDuration(5*time.Minute))
	assert.Equal(t, "30s", formatDuration(30*time.Second))
}
