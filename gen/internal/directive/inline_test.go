package directive

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseInlineDirective(t *testing.T) {
	d, problems := Parse([]string{"-inline=shop.orders", "-lookup", "OrderByKey"})
	require.Empty(t, problems)
	assert.Equal(t, "shop.orders", d.Inline)
	assert.Equal(t, "OrderByKey", d.Lookup)

	_, problems = Parse([]string{"-inline=", "-lookup="})
	assert.Equal(t, []string{
		"-inline needs the business table that holds the key, e.g. -inline=orders",
		"-lookup needs the method that reads a row by its key, e.g. -lookup=OrderByKey",
	}, problems)
}
