//go:build unix && !linux

package pgserver

import "syscall"

// procAttr runs a child as cred (nil: as this process's user). Outside Linux
// there is no parent-death signal: a server whose process is killed with
// SIGKILL keeps running until stopped by hand; Close stops it as usual.
func procAttr(cred *syscall.Credential, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
