package pgserver

import "syscall"

// procAttr runs a child as cred (nil: as this process's user) and has the
// kernel send it deathSig when the thread that started it exits, so it never
// outlives this process.
func procAttr(cred *syscall.Credential, deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: deathSig}
}
