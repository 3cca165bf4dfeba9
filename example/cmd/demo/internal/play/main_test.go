package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunRejectsBadUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"-no-such-flag"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), "args %q", args)
		assert.NotEmpty(t, stderr.String(), "args %q: a message", args)
		assert.Empty(t, stdout.String(), "args %q: nothing started", args)
	}
}
