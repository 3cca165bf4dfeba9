// Package pgbin finds PostgreSQL server binaries and the user to run them as,
// for the two places that start a throwaway server: runtime/idemtest (tests)
// and the example's demo.
package pgbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// DebianBinaries is where Debian and Ubuntu install the server binaries, one
// directory per major version.
const DebianBinaries = "/usr/lib/postgresql/*/bin"

// ErrNotFound is returned when no directory holds both initdb and postgres.
var ErrNotFound = errors.New("pgbin: PostgreSQL server binaries (initdb, postgres) not found")

// ErrNoServerUser is returned, wrapped, when running as root and there is no
// postgres system user to run the server as.
var ErrNoServerUser = errors.New("pgbin: running as root, and there is no postgres system user to run PostgreSQL as (it refuses root)")

// Find returns the directory holding initdb and postgres: the one on PATH
// first, then the highest version among the directories matching pattern
// (DebianBinaries in production).
func Find(pattern string) (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(initdb); isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob(pattern)
	var dirs []string
	for _, dir := range matches {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return "", ErrNotFound
	}
	slices.SortStableFunc(dirs, func(a, b string) int { return slices.Compare(Version(b), Version(a)) })
	return dirs[0], nil
}

// Version turns a binaries directory such as /usr/lib/postgresql/15/bin into
// comparable numbers ([15]; 9.6 gives [9 6]); nil if its parent is not a version.
func Version(binDir string) []int {
	var v []int
	for _, p := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// ServerUser is the user initdb and postgres run as: nil for the current
// user, the postgres system user when running as root.
func ServerUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoServerUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgbin: postgres user has uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgbin: postgres user has gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ServerEnv is the environment for initdb and postgres: this process's
// without PG* variables, which are meant for clients and could redirect the
// server, and with the C locale.
func ServerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}
