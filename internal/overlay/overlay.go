// Package overlay writes the go command's -overlay file, for the two places
// that load packages with files swapped in memory: the generator's loader
// (gen/internal/load) and the effect walk (internal/effectwalk).
package overlay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Write writes files (path → content) as the go command's -overlay file and
// the replacement files it names, in a new temporary directory whose name
// starts with prefix, and returns the flag and a function that removes them.
func Write(files map[string][]byte, prefix string) (string, func(), error) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("write load overlay: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	replace := map[string]string{}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, p := range paths {
		name := filepath.Join(tmp, fmt.Sprintf("%d.go", i))
		if err := os.WriteFile(name, files[p], 0o600); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("write load overlay: %w", err)
		}
		replace[p] = name
	}
	js, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "overlay.json"), js, 0o600)
	}
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("write load overlay: %w", err)
	}
	return "-overlay=" + filepath.Join(tmp, "overlay.json"), cleanup, nil
}
