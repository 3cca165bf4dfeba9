package migrations

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// atlasDirective matches an atlas file directive on a file's first line, the
// only place atlas looks for "atlas:sum ignore".
var atlasDirective = regexp.MustCompile(`^([ -~]*)atlas:(\w+)(?: +([ -~]*))*`)

// AtlasSum computes the content of atlas.sum for the .sql files in files
// (name → content), as atlas migrate hash does: the files in lexical order;
// each file's hash is the running SHA-256 over the names and contents of it
// and every file before it; the first line hashes the list of names and
// per-file hashes. A file whose first line is "-- atlas:sum ignore" adds its
// name to the running hash but is itself left out.
func AtlasSum(files map[string][]byte) []byte {
	var names []string
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(n, ".sql") {
			names = append(names, n)
		}
	}
	running := sha256.New()
	type entry struct{ name, hash string }
	var entries []entry
	for _, n := range names {
		running.Write([]byte(n))
		b := files[n]
		if m := atlasDirective.FindSubmatch(b); m != nil && string(m[2]) == "sum" && string(m[3]) == "ignore" {
			continue
		}
		running.Write(b)
		entries = append(entries, entry{n, base64.StdEncoding.EncodeToString(running.Sum(nil))})
	}
	total := sha256.New()
	var body bytes.Buffer
	for _, e := range entries {
		total.Write([]byte(e.name))
		total.Write([]byte(e.hash))
		fmt.Fprintf(&body, "%s h1:%s\n", e.name, e.hash)
	}
	return append([]byte("h1:"+base64.StdEncoding.EncodeToString(total.Sum(nil))+"\n"), body.Bytes()...)
}
