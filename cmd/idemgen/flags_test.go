package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen"
)

var flagLineRE = regexp.MustCompile(`^\t(-[a-z-]+)`)

// listedFlags returns the flags flags.txt documents, each with its text
// (continuation lines included), in order.
func listedFlags() (names []string, text map[string]string) {
	text = map[string]string{}
	last := ""
	for _, l := range strings.Split(flagList, "\n") {
		if m := flagLineRE.FindStringSubmatch(l); m != nil {
			last = m[1]
			names = append(names, last)
			text[last] = l
		} else if last != "" && strings.HasPrefix(l, "\t ") {
			text[last] += " " + strings.TrimSpace(l)
		} else {
			last = ""
		}
	}
	return names, text
}

// -h prints every flag idemgen takes, grouped, each with its default: the
// flags a directive accepts (as the directive parser names them) and the
// package run's own -check and -q, no more and no fewer.
func TestHelpListsEveryFlagWithItsDefault(t *testing.T) {
	var out, errb bytes.Buffer
	t.Setenv("GOFILE", "")
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errb))
	assert.Contains(t, out.String(), flagList, "-h prints flags.txt whole")

	_, problems := gen.ParseDirectiveArgs([]string{"-no-such-flag"})
	require.Len(t, problems, 1)
	known := regexp.MustCompile(`\(known: (.*)\)`).FindStringSubmatch(problems[0])
	require.NotNil(t, known, problems[0])
	want := append(strings.Split(known[1], ", "), "-check", "-q")
	got, text := listedFlags()
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got, "the flags -h lists and the flags idemgen takes")

	for _, group := range []string{"Mode (per method):", "Retention and locks (per method):", "Migrations (per package", "Tests:", "Loading and output:"} {
		assert.Contains(t, "\n"+flagList, "\n"+group, "group %s", group)
	}
	for f, line := range text {
		assert.Contains(t, line, "(default ", "%s states its default", f)
	}
}
