//go:build unix && !linux

package pglocal

import "syscall"

// procAttr runs a child as cred (nil: as us). Outside Linux there is no
// parent-death signal: if the demo is killed with SIGKILL, the server keeps
// running until stopped by hand; Stop and Ctrl-C stop it as usual.
func procAttr(cred *syscall.Credential, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
