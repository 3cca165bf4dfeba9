// Command demo runs the example payments service on a throwaway PostgreSQL
// and plays a client against it (see ./internal/play for what it shows):
//
//	go run -C example/cmd/demo .               # play the demo
//	go run -C example/cmd/demo . -serve        # keep the API up on 127.0.0.1:8080 for curl
//
// This package is a launcher that imports only the standard library, so it
// compiles in moments and can say what happens next before the demo itself
// (pgx, goose, the example service) is compiled: on a first run, with an
// empty build cache, that takes a minute or more in which nothing else would
// be printed. It then builds the demo into a temporary directory and runs
// it, passing the arguments, standard streams and exit code through.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	os.Exit(launch(os.Args[1:], os.Stdout, os.Stderr))
}

// launch builds ./internal/play (relative to the current directory, which
// go run -C example/cmd/demo sets), runs it with args and returns the exit
// code the demo should end with.
func launch(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stdout, "Building the demo (the first run compiles pgx, goose and the example service: "+
		"a minute or two on a small machine; later runs start at once)...")
	dir, err := os.MkdirTemp("", "idemgen-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "play")
	build := exec.Command("go", "build", "-o", bin, "./internal/play")
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(stderr, "demo: go build ./internal/play (run the demo with go run -C example/cmd/demo .): %v\n", err)
		return 1
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Ctrl-C reaches the whole process group, the demo included, which stops
	// cleanly; the launcher waits for it. A SIGTERM sent to the launcher
	// alone is passed on.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGTERM {
				_ = cmd.Process.Signal(s) // it may have ended already
			}
		case err := <-done:
			return exitCode(err, stderr)
		}
	}
}

// exitCode is the demo's exit code for the error cmd.Wait returned: 0, the
// code the demo ended with, or 1 if it did not run or was killed.
func exitCode(err error, stderr io.Writer) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
}
