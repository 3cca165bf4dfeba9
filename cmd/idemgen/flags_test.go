package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/gen"
)

var flagLineRE = regexp.MustCompile(`^\t(-[a-z-]+)`)

// flags.txt is the flag list -h prints, rendered from the flag table
// (gen.Flags), kept as a file so the README's copy can be compared with it
// (readme_test.go); go test -run FlagsTxt -update rewrites it.
func TestFlagsTxtIsTheTable(t *testing.T) {
	if *update {
		require.NoError(t, os.WriteFile("flags.txt", []byte(gen.FlagHelp()), 0o644))
	}
	b, err := os.ReadFile("flags.txt")
	require.NoError(t, err)
	assert.Equal(t, gen.FlagHelp(), string(b), "flags.txt differs from the flag table: go test ./cmd/idemgen -run FlagsTxt -update, then copy it into the README")
}

// A package run binds every flag the table says it takes, and refuses a
// directive's flag with where it belongs.
func TestPackageRunTakesTheTablesFlags(t *testing.T) {
	for _, f := range gen.Flags() {
		arg := "-" + f.Name
		if f.Name == "tags" {
			arg += "=x"
		} else if !f.Boolean() || f.Value == "BOOL" {
			arg += "=1m"
		}
		var out, errb bytes.Buffer
		_, code := parsePackageRun([]string{arg, "./..."}, &out, &errb)
		if f.Where&gen.InPackageRun != 0 {
			assert.Equal(t, -1, code, "%s: %s", arg, errb.String())
		} else {
			assert.Equal(t, 2, code, arg)
			assert.Contains(t, errb.String(), "belongs in a //go:generate idemgen directive", arg)
		}
	}
}

// listedFlags returns the flags flags.txt documents, each with its text
// (continuation lines included), in order.
func listedFlags() (names []string, text map[string]string) {
	text = map[string]string{}
	last := ""
	for _, l := range strings.Split(gen.FlagHelp(), "\n") {
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
	flagList := gen.FlagHelp()
	assert.Contains(t, out.String(), flagList, "-h prints the flag table whole")

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
