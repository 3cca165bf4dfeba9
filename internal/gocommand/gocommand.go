// Package gocommand reads a //go:generate line as go generate does and
// tells whether it runs idemgen: what the generator (gen/internal/directive)
// and the analyzers (analysis/internal/annot) both read, in one place.
package gocommand

import (
	"fmt"
	"strconv"
	"strings"
)

// Split splits a //go:generate line the way go generate does: words
// separated by spaces, double-quoted words unquoted.
func Split(line string) ([]string, error) {
	var words []string
	line = strings.TrimSpace(line)
	for line != "" {
		if line[0] == '"' {
			end := 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(line) {
				return nil, fmt.Errorf("unterminated quoted string")
			}
			w, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, fmt.Errorf("bad quoted string %s", line[:end+1])
			}
			words = append(words, w)
			line = strings.TrimLeft(line[end+1:], " \t")
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		words = append(words, line[:i])
		line = strings.TrimLeft(line[i:], " \t")
	}
	return words, nil
}

// IdemgenArgs reports whether a go:generate command runs idemgen, in any of
// its forms, and returns the arguments after the command:
//
//	idemgen ARGS
//	go tool idemgen ARGS
//	go run github.com/idemgen/idemgen/cmd/idemgen[@version] ARGS
func IdemgenArgs(words []string) ([]string, bool) {
	isIdemgen := func(w string) bool {
		w, _, _ = strings.Cut(w, "@")
		return w == "idemgen" || strings.HasSuffix(w, "/idemgen")
	}
	switch {
	case len(words) >= 1 && isIdemgen(words[0]):
		return words[1:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "tool" && isIdemgen(words[2]):
		return words[3:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "run":
		for i := 2; i < len(words); i++ {
			if strings.HasPrefix(words[i], "-") { // go run's own flags
				continue
			}
			if isIdemgen(words[i]) {
				return words[i+1:], true
			}
			return nil, false
		}
	}
	return nil, false
}
