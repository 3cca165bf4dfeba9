package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is a child started by startLocked.
type process struct {
	proc   *os.Process
	exited chan struct{} // closed once the child has exited and been reaped
}

// startLocked starts cmd from a goroutine locked to its OS thread, which
// stays alive, waiting for the child, as long as the child runs: on Linux
// the parent-death signal (procAttr) fires when the thread that started the
// child exits, not the process, and an unlocked thread could be retired by
// the Go runtime while the child is still in use (go.dev/issue/27505). The
// signal still fires if this process dies, even by SIGKILL. closers are
// closed once the child has started (its copies of them stay open).
func startLocked(cmd *exec.Cmd, closers ...io.Closer) (*process, error) {
	p := &process{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see the doc comment
		defer close(p.exited)
		err := cmd.Start()
		for _, c := range closers {
			_ = c.Close()
		}
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	p.proc = cmd.Process
	return p, nil
}

// runLocked runs cmd to the end as startLocked starts it, and returns its
// combined output.
func runLocked(cmd *exec.Cmd) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	r := <-done
	if r.err != nil {
		return r.out, fmt.Errorf("%s: %w", cmd, r.err)
	}
	return r.out, nil
}

// exited reports whether p has exited.
func exited(p *process) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends sig to p and waits until it exits; once ctx ends or killGrace
// passes first, it kills it (SIGKILL) and waits for that.
func (p *process) stop(ctx context.Context, sig syscall.Signal) error {
	if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	grace := time.NewTimer(killGrace)
	defer grace.Stop()
	select {
	case <-p.exited:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	_ = p.proc.Kill()
	<-p.exited
	return nil
}
