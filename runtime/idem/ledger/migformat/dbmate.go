package migformat

import (
	"fmt"
	"regexp"
	"strings"
)

// dbmate's section markers, and the option that runs a section outside a
// transaction.
const (
	dbmateUp   = "migrate:up"
	dbmateDown = "migrate:down"
	dbmateNoTx = "transaction:false"
)

// dbmate: one file, a migrate:up and a migrate:down section; a section with
// transaction:false runs outside a transaction, as a single statement.
func dbmate() Format {
	return Format{
		Name: "dbmate", Tool: "dbmate", Width: 5, Down: DownSection, ToolTx: true, Lone: true,
		Rollback:      "dbmate rollback runs the migrate:down section below, which ",
		RollbackThree: "dbmate rollback, three times,",
		sections: func(noTx bool) layout {
			opt := ""
			if noTx {
				opt = " " + dbmateNoTx
			}
			return layout{up: []string{"-- " + dbmateUp + opt}, down: []string{"-- " + dbmateDown + opt}}
		},
		up: parseDbmate,
	}
}

// dbmateMarker matches the line of a dbmate section marker, capturing the
// options after it.
func dbmateMarker(marker string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^--\s*` + regexp.QuoteMeta(marker) + `(.*)$`)
}

// parseDbmate reads a dbmate file: the up section runs from "-- migrate:up"
// to "-- migrate:down"; the option transaction:false runs it outside a
// transaction.
func parseDbmate(src string) (Script, error) {
	loc := dbmateMarker(dbmateUp).FindStringSubmatchIndex(src)
	if loc == nil {
		return Script{}, fmt.Errorf("no -- %s section", dbmateUp)
	}
	inTx := true
	for _, opt := range strings.Fields(src[loc[2]:loc[3]]) {
		switch k, v, _ := strings.Cut(opt, ":"); {
		case opt == dbmateNoTx:
			inTx = false
		case k == "transaction" && v == "true":
		default:
			return Script{}, fmt.Errorf("-- %s option %q is not supported by idemtest", dbmateUp, opt)
		}
	}
	body := src[loc[1]:]
	if d := dbmateMarker(dbmateDown).FindStringIndex(body); d != nil {
		body = body[:d[0]]
	}
	stmts, err := split(body, 1+strings.Count(src[:loc[1]], "\n"))
	return Script{Statements: stmts, InTx: inTx}, err
}
