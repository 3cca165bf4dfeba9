package migformat

import (
	"fmt"
	"regexp"
)

// AtlasSumFile is the name of the integrity file Atlas keeps beside the
// migrations (the atlas format's SumFile).
const AtlasSumFile = "atlas.sum"

// atlasNoTx is Atlas's directive that runs a file outside a transaction.
const atlasNoTx = "-- atlas:txmode none"

// atlas: one file of up statements, in a transaction unless the header says
// txmode none; Atlas plans a rollback itself, and keeps atlas.sum beside
// the files.
func atlas() Format {
	return Format{
		Name: "atlas", Tool: "Atlas", Width: 5, Down: DownPlanned, ToolTx: true, SumFile: AtlasSumFile,
		Rollback: "atlas migrate down plans the reverse of this file against your dev database and applies it: it ",
		sections: func(noTx bool) layout {
			if noTx {
				return layout{directives: []string{atlasNoTx}}
			}
			return layout{}
		},
		up: parseAtlas,
	}
}

// parseAtlas reads an atlas file: the whole file runs, in a transaction
// unless "-- atlas:txmode none" says otherwise.
func parseAtlas(src string) (Script, error) {
	inTx := true
	for _, m := range regexp.MustCompile(`(?m)^--\s*atlas:(\w+)\s*(.*?)\s*$`).FindAllStringSubmatch(src, -1) {
		switch {
		case "-- atlas:"+m[1]+" "+m[2] == atlasNoTx:
			inTx = false
		case m[1] == "txmode" && (m[2] == "file" || m[2] == "all"):
		case m[1] == "nolint":
		default:
			return Script{}, fmt.Errorf("directive -- atlas:%s %s is not supported by idemtest", m[1], m[2])
		}
	}
	stmts, err := split(src, 1)
	return Script{Statements: stmts, InTx: inTx}, err
}
