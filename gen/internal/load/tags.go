package load

import (
	"fmt"
	gobuild "go/build"
	"go/build/constraint"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/gen/internal/directive"
	"github.com/idemgen/idemgen/gen/internal/names"
)

// Build constraints. One idem_gen.go serves a whole package, so it is
// generated from every annotated file at once and carries their combined
// constraint (Package.Constraint). A file whose //go:build line excludes it
// from the load (go generate runs its directive, but passes no tags on) is
// not skipped: the package is loaded again with tags that satisfy every
// annotated file's constraint, the user's -tags included.

// annotatedIgnored returns the files of p that the build context left out
// and that hold an idemgen directive.
func annotatedIgnored(ignored []string) []string {
	var out []string
	for _, name := range ignored {
		if strings.HasSuffix(name, "_test.go") || !strings.HasSuffix(name, ".go") {
			continue
		}
		if b := filepath.Base(name); b == names.GoFile || b == names.TestFile {
			continue
		}
		if directive.InFile(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// fileConstraint returns the //go:build expression of a Go file, nil when
// it has none.
func fileConstraint(path string) (constraint.Expr, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			break
		}
		if constraint.IsGoBuild(line) {
			x, err := constraint.Parse(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
			}
			return x, nil
		}
	}
	return nil, nil
}

// tagsFor returns the fewest tags, added to user (the -tags given), under
// which every file in files is part of the build, or why there are none.
func tagsFor(user string, files []string) ([]string, error) {
	base := splitTags(user)
	var atoms []string
	seen := map[string]bool{}
	var exprs []string
	for _, f := range files {
		x, err := fileConstraint(f)
		if err != nil {
			return nil, err
		}
		if x == nil {
			continue
		}
		exprs = append(exprs, filepath.Base(f)+": //go:build "+x.String())
		x.Eval(func(tag string) bool {
			if !seen[tag] {
				seen[tag] = true
				atoms = append(atoms, tag)
			}
			return false
		})
	}
	sort.Strings(atoms)
	if len(atoms) > 12 {
		atoms = atoms[:12]
	}
	match := func(extra []string) bool {
		ctx := gobuild.Default
		ctx.BuildTags = append(append([]string{}, base...), extra...)
		for _, f := range files {
			if ok, err := ctx.MatchFile(filepath.Dir(f), filepath.Base(f)); err != nil || !ok {
				return false
			}
		}
		return true
	}
	// The smallest subsets first, each size in a stable order.
	for size := 0; size <= len(atoms); size++ {
		var found []string
		var try func(start int, chosen []string) bool
		try = func(start int, chosen []string) bool {
			if len(chosen) == size {
				if match(chosen) {
					found = append([]string{}, chosen...)
					return true
				}
				return false
			}
			for i := start; i < len(atoms); i++ {
				if try(i+1, append(chosen, atoms[i])) {
					return true
				}
			}
			return false
		}
		if try(0, nil) {
			return found, nil
		}
	}
	return nil, fmt.Errorf("no set of build tags includes every file with an idemgen directive at once (%s), and one %s serves the whole package: move methods whose constraints exclude each other into packages of their own", strings.Join(exprs, "; "), names.GoFile)
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, t)
	}
	return out
}

// joinTags adds extra to the -tags value user.
func joinTags(user string, extra []string) string {
	return strings.Join(append(splitTags(user), extra...), ",")
}

// CombinedConstraint is the //go:build expression of the generated files:
// the conjunction of the constraints of files (those the generated code
// refers to), "" when none has one.
func CombinedConstraint(files []string) (string, error) {
	byText := map[string]constraint.Expr{}
	for _, f := range files {
		x, err := fileConstraint(f)
		if err != nil {
			return "", err
		}
		if x != nil {
			byText[x.String()] = x
		}
	}
	texts := make([]string, 0, len(byText))
	for t := range byText {
		texts = append(texts, t)
	}
	sort.Strings(texts)
	var all constraint.Expr
	for _, t := range texts {
		if all == nil {
			all = byText[t]
		} else {
			all = &constraint.AndExpr{X: all, Y: byText[t]}
		}
	}
	if all == nil {
		return "", nil
	}
	return all.String(), nil
}

// PositionOf is where a package-level problem with build tags is reported:
// the first line of file.
func PositionOf(file string) token.Position {
	return token.Position{Filename: file, Line: 1, Column: 1}
}
