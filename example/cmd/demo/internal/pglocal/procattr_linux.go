package pglocal

import "syscall"

// procAttr runs a child as cred (nil: as us) and has the kernel send it
// deathSig when the thread that started it exits, so the server never
// outlives the demo.
func procAttr(cred *syscall.Credential, deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: deathSig}
}
