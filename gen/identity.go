package gen

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem/ledger"
	"github.com/idemgen/idemgen/templates"
)

// sources are the generator's own sources. Their hash identifies what the
// generator emits, the same for every build of the same code (go tool,
// go run, go install, a test binary), so the stamp stays valid across
// builds and changes whenever the generator does.
//
//go:embed *.go migrations/*.go
var sources embed.FS

// generatorID identifies the generator for the input stamp: the output
// format version, the generator's sources (tests excluded), the migration
// templates and the ledger schema the migrations are rendered from.
func generatorID() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", Version)
	hashFS := func(fsys fs.FS, skipTests bool) {
		_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (skipTests && strings.HasSuffix(path, "_test.go")) {
				return nil
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return nil
			}
			fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
			h.Write(b)
			return nil
		})
	}
	hashFS(sources, true)
	hashFS(templates.FS, false)
	if l, err := ledger.New(ledger.DefaultTable); err == nil {
		fmt.Fprintf(h, "%s\x00", strings.Join(l.DDL(), "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}
