package pgserver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// ownerFile holds the pid of the process that owns a server directory.
	ownerFile = "owner.pid"
	// maxSocketPath keeps the socket path under the kernel's sun_path limit
	// (108 bytes on Linux, 104 on the BSDs).
	maxSocketPath = 100
)

// TempRoot is where a server directory named prefix+random is made: the
// system temp directory, or /tmp when that would make the socket path too
// long or, when the server runs as another user (cred != nil), that user
// could not reach it.
func TempRoot(prefix string, cred *syscall.Credential) string {
	root := os.TempDir()
	// <root>/<prefix>1234567890/sock/.s.PGSQL.65535
	if len(root)+len("/"+prefix+"1234567890/sock/.s.PGSQL.65535") > maxSocketPath {
		return "/tmp"
	}
	if cred != nil && !reachableByAll(root) {
		return "/tmp"
	}
	return root
}

// reachableByAll reports whether every directory on the path to dir may be
// searched by any user.
func reachableByAll(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// RemoveStale removes the server directories under root named prefix+…
// that processes which died without closing their server left behind. A
// directory is stale when the process that made it (named in its owner
// file) is gone; if its postmaster somehow survived, it is stopped first and
// the directory is left for the next run. A directory without an owner file
// is one being made right now, or one this package did not make: it is
// removed only once it is an hour old and no postmaster runs in it.
func RemoveStale(root, prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(root, prefix+"*"))
	for _, dir := range dirs {
		data := filepath.Join(dir, "data")
		pm, running := readPid(filepath.Join(data, "postmaster.pid"))
		running = running && alive(pm)
		owner, ok := readPid(filepath.Join(dir, ownerFile))
		switch {
		case !ok:
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Hour || running {
				continue
			}
		case alive(owner):
			continue
		case running:
			if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(data)) {
				_ = syscall.Kill(pm, syscall.SIGQUIT)
			}
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// readPid reads the pid on the first line of a pid file.
func readPid(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

// alive reports whether a process with this pid is running. A zombie (dead,
// not yet reaped by its new parent) does not count.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs: trust kill(2)
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		state := stat[i+2]
		return state != 'Z' && state != 'X'
	}
	return true
}
