package pgserver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The process table as Linux's /proc shows it; elsewhere these find no
// process.

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var children []int
	for _, f := range stats {
		ppid, _, ok := procStat(f)
		if ok && ppid == pid {
			c, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if err == nil {
				children = append(children, c)
			}
		}
	}
	return children, nil
}

// live reports whether process pid exists and is not a zombie.
func live(pid int) bool {
	_, state, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
	return ok && state != 'Z' && state != 'X'
}

// procStat reads the parent pid and the state of a process from its
// /proc/PID/stat file; ok is false when the process is gone.
func procStat(path string) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so read after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return ppid, fields[0][0], true
}
