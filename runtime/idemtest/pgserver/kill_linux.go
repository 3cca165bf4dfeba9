package pgserver

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// killTree SIGKILLs p, a postmaster, and every process it started. The
// postmaster is stopped first (SIGSTOP), so that it forks nothing while its
// children are listed; the children and then the postmaster are killed;
// killTree returns once the postmaster has been reaped and no child is left
// but as a zombie (its new parent's to reap), or when ctx ends.
func killTree(ctx context.Context, p *process) error {
	pid := p.proc.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop the postmaster %d: %w", pid, err)
	}
	children, err := childrenOf(pid)
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-p.exited
		return err
	}
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-ctx.Done():
		return fmt.Errorf("the postmaster %d did not exit: %w", pid, context.Cause(ctx))
	}
	for _, c := range children {
		for live(c) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("process %d of the postmaster %d did not exit: %w", c, pid, context.Cause(ctx))
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}
