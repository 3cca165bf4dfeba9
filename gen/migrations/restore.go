package migrations

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/gen/stamp"
	"github.com/idemgen/idemgen/runtime/idem/ledger"
)

// Kinds of Problem.
const (
	// Edited: an idemgen migration whose bytes differ from what idemgen
	// wrote there (the sum in Config.Written).
	Edited = "hand-edited"
	// Missing: a migration idemgen wrote (listed in Config.Written) is gone
	// and cannot be written back under its own name.
	Missing = "missing"
	// Unordered: the directory's migrations, applied in order, would fail:
	// one needs what no migration before it creates.
	Unordered = "cannot apply"
)

// Problem is a file of the migrations directory that Plan will not work
// around: while one exists Plan returns a *ProblemError and nothing is
// written.
type Problem struct {
	File   string // name in the directory
	Kind   string // Edited, Missing or Unordered
	Reason string // Missing and Unordered: what is wrong, without advice
	// Have and Want are, for Edited, the file and what idemgen wrote there;
	// Want is nil when this version of idemgen cannot reproduce it.
	Have, Want []byte
}

// Message says what is wrong with the file and what to do, prefixed with
// its path: dir (as the user names the migrations directory) and File.
func (p Problem) Message(dir string) string {
	name := path.Join(dir, p.File)
	const never = "existing migrations are never rewritten or renumbered (they may have been applied already)"
	switch p.Kind {
	case Edited:
		msg := fmt.Sprintf("%s: hand-edited (differs from what idemgen wrote). Restore it (git checkout -- %s) and put your schema change in a new migration of your own: %s.", name, name, never)
		if p.Want == nil {
			msg += fmt.Sprintf(" This version of idemgen cannot reproduce the file to show the difference; git log -p -- %s shows it.", name)
		}
		return msg
	case Missing:
		return fmt.Sprintf("%s: missing, and idemgen cannot write it back where it was: %s. Restore it from version control (git checkout -- %s): %s.", name, p.Reason, name, never)
	}
	return fmt.Sprintf("%s: %s: %s. A migration that idemgen wrote before this one has been deleted: restore it from version control (git log --diff-filter=D --name-only -- %s names it); %s, so idemgen will not put it back before %s itself.",
		name, Unordered, p.Reason, dir, never, p.File)
}

// ProblemError is Plan's refusal to write a directory that would not apply
// or would accept a hand edit.
type ProblemError struct {
	// Dir is the migrations directory as the user names it; the caller
	// sets it ("" prints bare file names).
	Dir      string
	Problems []Problem
}

func (e *ProblemError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message(e.Dir)
	}
	return strings.Join(msgs, "\n")
}

// plan is Plan for an explicit ledger schema (tests pass older schemas to
// exercise the migrations a schema change produces), with the checks that
// keep the directory applicable:
//
//  1. An idemgen file whose sum differs from the one recorded when it was
//     written is refused (Edited), never accepted nor rewritten.
//  2. A file listed in cfg.Written that is absent is written back under its
//     own name (restoreOne): the smallest window of idemgen's versions
//     around it is planned again from the other files, numbered from the
//     window's start, and must come back byte for byte, the missing files
//     with their recorded sums; otherwise Plan refuses (Missing). Existing
//     files are never renamed or rewritten: planAt refuses a name whose
//     file has other bytes.
//  3. The result, applied in version order, must give every migration what
//     it needs (a table before its changes, columns before their index),
//     or Plan refuses (Unordered): that catches a deleted file no stamp
//     lists.
func plan(cfg Config, schema ledger.Schema, existing map[string][]byte) (map[string][]byte, error) {
	if probs := editedFiles(cfg, schema, existing); len(probs) > 0 {
		return nil, &ProblemError{Problems: probs}
	}
	out, err := planRestoring(cfg, schema, existing)
	if err != nil {
		return nil, err
	}
	if p := checkOrder(existing, out); p != nil {
		return nil, &ProblemError{Problems: []Problem{*p}}
	}
	return out, nil
}

// planRestoring is step 2 of plan: it writes back the missing files one at
// a time, lowest version first, then plans what is still lacking after the
// last version.
func planRestoring(cfg Config, schema ledger.Schema, existing map[string][]byte) (map[string][]byte, error) {
	dir := make(map[string][]byte, len(existing))
	maps.Copy(dir, existing)
	for _, m := range missingFiles(cfg.Written, existing) {
		if _, back := dir[m]; back {
			continue // written back with an earlier one
		}
		files, reason := restoreOne(cfg, schema, dir, m)
		if files == nil {
			return nil, &ProblemError{Problems: []Problem{{File: m, Kind: Missing, Reason: reason}}}
		}
		maps.Copy(dir, files)
	}
	out, _, err := planAt(cfg, schema, dir, 0)
	return out, err
}

// maxGroup is the most versions one planned change takes: golang-migrate
// and dbmate build a concurrent index in three migrations.
const maxGroup = 3

// restoreOne finds the files to write back for the missing file m: the
// smallest window of idemgen's versions around m's whose files, taken out
// of dir and planned again numbered from the window's first version, come
// back byte for byte, with m among them. It returns the files that are not
// in dir (none when what m created is in other files already), or nil and
// why none fits.
func restoreOne(cfg Config, schema ledger.Schema, dir map[string][]byte, m string) (map[string][]byte, string) {
	v, _, _ := versionOf(m)
	vers := []uint64{v}
	for name, b := range dir {
		if w, _, ok := versionOf(name); ok && isOwned(b) && !slices.Contains(vers, w) {
			vers = append(vers, w)
		}
	}
	slices.Sort(vers)
	i := slices.Index(vers, v)
	reason := ""
	for size := 1; size <= maxGroup; size++ {
		for a := max(i-size+1, 0); a <= i && a+size <= len(vers); a++ {
			files, why := tryWindow(cfg, schema, dir, m, vers[a], vers[a+size-1])
			if files != nil {
				return files, ""
			}
			if reason == "" {
				reason = why
			}
		}
	}
	if reason == covered && moved(dir, m) {
		// m was moved to another version, and the directory without it
		// lacks nothing: nothing to write back; checkOrder still sees that
		// the directory applies.
		return map[string][]byte{}, ""
	}
	return nil, reason
}

// moved reports whether dir holds an idemgen file named like m but for the
// version.
func moved(dir map[string][]byte, m string) bool {
	_, slug, _ := strings.Cut(m, "_")
	for name, b := range dir {
		if _, s, _ := strings.Cut(name, "_"); s == slug && name != m && isOwned(b) {
			return true
		}
	}
	return false
}

// covered is tryWindow's answer when the directory without m needs nothing.
const covered = "the other files already create everything it did"

// tryWindow plans dir without its idemgen files of versions lo..hi,
// numbered from lo; see restoreOne.
func tryWindow(cfg Config, schema ledger.Schema, dir map[string][]byte, m string, lo, hi uint64) (map[string][]byte, string) {
	rest := make(map[string][]byte, len(dir))
	var removed []string
	for name, b := range dir {
		if w, _, ok := versionOf(name); ok && isOwned(b) && w >= lo && w <= hi {
			removed = append(removed, name)
			continue
		}
		rest[name] = b
	}
	out, added, err := planAt(cfg, schema, rest, lo)
	if err != nil {
		return nil, err.Error()
	}
	if !slices.Contains(added, m) {
		if len(added) == 0 {
			return nil, covered
		}
		return nil, fmt.Sprintf("planned without it, the directory would get %s instead", strings.Join(added, ", "))
	}
	back := map[string][]byte{}
	for _, name := range added {
		have, ok := dir[name]
		switch {
		case ok && string(have) != string(out[name]):
			return nil, fmt.Sprintf("planned without it, %s would not come out as it is", name)
		case !ok && !hasKey(cfg.Written, name):
			return nil, fmt.Sprintf("planned without it, the directory would also get %s", name)
		case !ok && cfg.Written[name] != "" && stamp.FileSum(out[name]) != cfg.Written[name]:
			return nil, fmt.Sprintf("written back from the other files, %s would not hold what idemgen wrote there before (a later migration changed its table, or this idemgen writes it differently)", name)
		case !ok:
			back[name] = out[name]
		}
	}
	for _, name := range removed {
		if !slices.Contains(added, name) {
			return nil, fmt.Sprintf("planned without it, %s would not come out as it is", name)
		}
	}
	return back, ""
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// missingFiles returns the migrations written lists that are absent from
// existing, in version order.
func missingFiles(written map[string]string, existing map[string][]byte) []string {
	var out []string
	for name := range written {
		if _, ok := existing[name]; ok || !strings.HasSuffix(name, ".sql") {
			continue
		}
		if _, _, ok := versionOf(name); ok {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, byVersion)
	return out
}

func byVersion(a, b string) int {
	va, _, _ := versionOf(a)
	vb, _, _ := versionOf(b)
	return cmp.Or(cmp.Compare(va, vb), strings.Compare(a, b))
}

// editedFiles returns a Problem for every file cfg.Written records a sum
// for whose bytes have another, with what idemgen wrote when this version
// reproduces it: the directory without the file, planned as if it had been
// deleted, writes it back with the recorded sum.
func editedFiles(cfg Config, schema ledger.Schema, existing map[string][]byte) []Problem {
	var out []Problem
	for _, name := range slices.Sorted(maps.Keys(cfg.Written)) {
		sum := cfg.Written[name]
		have, ok := existing[name]
		if !ok || sum == "" || name == AtlasSumFile || stamp.FileSum(have) == sum {
			continue
		}
		p := Problem{File: name, Kind: Edited, Have: have}
		rest := make(map[string][]byte, len(existing))
		maps.Copy(rest, existing)
		delete(rest, name)
		if back, err := planRestoring(cfg, schema, rest); err == nil && stamp.FileSum(back[name]) == sum {
			p.Want = back[name]
		}
		out = append(out, p)
	}
	return out
}

// checkOrder applies the idemgen files of the directory after Plan (the
// existing files with out over them) in version order, by their state
// lines, and returns the first that needs what no earlier one creates: a
// change to an idemgen table before the migration creating it, or an index
// over columns no earlier migration adds. Tables idemgen does not create
// (inline mode's business tables) are the user's, assumed to exist.
func checkOrder(existing, out map[string][]byte) *Problem {
	all := make(map[string][]byte, len(existing)+len(out))
	maps.Copy(all, existing)
	maps.Copy(all, out)
	var names []string
	states := map[string][]fileState{}
	creates := map[string]string{} // table → the file creating it
	for name, b := range all {
		if !isOwned(b) {
			continue
		}
		fss := stateLines(b)
		if len(fss) == 0 {
			continue
		}
		names = append(names, name)
		states[name] = fss
		for _, fs := range fss {
			if fs.creates {
				creates[fs.table] = name
			}
		}
	}
	slices.SortFunc(names, byVersion)
	created := map[string]bool{}
	columns := map[string]map[string]bool{}
	for i, name := range names {
		for _, fs := range states[name] {
			if by := creates[fs.table]; by != "" && !fs.creates && !created[fs.table] {
				return &Problem{File: name, Kind: Unordered, Reason: fmt.Sprintf("it changes table %s, which no migration before it creates (%s does, after it)", fs.table, by)}
			}
			created[fs.table] = created[fs.table] || fs.creates
			if columns[fs.table] == nil {
				columns[fs.table] = map[string]bool{}
			}
			for _, c := range fs.columns {
				columns[fs.table][c] = true
			}
			for _, ix := range fs.indexes {
				for _, c := range indexColumns(fs.table, ix, creates[fs.table] != "") {
					if !columns[fs.table][c] {
						return &Problem{File: name, Kind: Unordered, Reason: fmt.Sprintf("it builds index %s_%s on %s, but no migration before it adds column %s%s",
							fs.table, ix, fs.table, c, addedLater(names[i+1:], states, existing, fs.table, c))}
					}
				}
			}
		}
	}
	return nil
}

// addedLater names the first of names that adds column c to table, a file
// of the directory or one Plan would write.
func addedLater(names []string, states map[string][]fileState, existing map[string][]byte, table, c string) string {
	for _, name := range names {
		for _, fs := range states[name] {
			if fs.table != table || !slices.Contains(fs.columns, c) {
				continue
			}
			if _, ok := existing[name]; ok {
				return fmt.Sprintf(" (%s does, after it)", name)
			}
			return fmt.Sprintf(" (idemgen would add it in a new %s, after it)", name)
		}
	}
	return ""
}

// indexColumns returns the columns of the index with the suffix on table:
// a ledger index when idemgen creates the table, inline mode's key index
// otherwise; nil when this version of idemgen does not know the index.
func indexColumns(table, suffix string, ledgerTable bool) []string {
	if ledgerTable {
		l, err := ledger.New(table)
		if err != nil {
			return nil
		}
		for _, ix := range l.Indexes {
			if ix.Suffix == suffix {
				return ix.Columns
			}
		}
		return nil
	}
	if suffix != ledger.InlineIndexSuffix {
		return nil
	}
	s, err := ledger.NewInline(table)
	if err != nil {
		return nil
	}
	return s.Index().Columns
}

// stateLines returns the state lines of one idemgen file; lines that do not
// parse are left out (readState reports them).
func stateLines(b []byte) []fileState {
	var out []fileState
	for _, l := range strings.Split(string(b), "\n") {
		line, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), statePrefix)
		if !ok {
			continue
		}
		if fs, err := parseState(line); err == nil {
			out = append(out, fs)
		}
	}
	return out
}
