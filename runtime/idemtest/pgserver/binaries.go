package pgserver

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

// ErrNoBinaries is returned, wrapped, when no directory holds both initdb
// and postgres.
var ErrNoBinaries = errors.New("pgserver: PostgreSQL server binaries (initdb, postgres) not found on PATH or under " + DebianBinaries)

// ErrNoServerUser is returned, wrapped, when running as root and there is no
// postgres system user to run the server as.
var ErrNoServerUser = errors.New("pgserver: running as root, and there is no postgres system user to run PostgreSQL as (it refuses root)")

// FindBinaries returns the directory holding initdb and postgres: the one on
// PATH first, then the highest version among the directories matching
// pattern ([DebianBinaries] outside tests). A directory on PATH that only
// links to the binaries is resolved to theirs, which also holds pg_ctl and
// pg_basebackup.
func FindBinaries(pattern string) (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(initdb); isExecutable(filepath.Join(dir, "postgres")) {
			return resolve(dir), nil
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
		return "", ErrNoBinaries
	}
	slices.SortStableFunc(dirs, func(a, b string) int { return slices.Compare(Version(b), Version(a)) })
	return resolve(dirs[0]), nil
}

// resolve returns, when the postgres binary in dir is a link, the directory
// of the binary it links to (if that holds initdb too), and otherwise dir.
func resolve(dir string) string {
	link := filepath.Join(dir, "postgres")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return dir
	}
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		return dir
	}
	if d := filepath.Dir(real); isExecutable(filepath.Join(d, "initdb")) {
		return d
	}
	return dir
}

// Version turns a binaries directory such as /usr/lib/postgresql/15/bin into
// comparable numbers ([15]; 9.6 gives [9 6]); nil if its parent is not a
// version.
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

// ServerUser is the user the server binaries run as: nil for the current
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
		return nil, fmt.Errorf("pgserver: postgres user has uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgserver: postgres user has gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ServerEnv is the environment of the server binaries: this process's
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
