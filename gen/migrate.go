package gen

import (
	"github.com/idemgen/idemgen/gen/ir"
	"github.com/idemgen/idemgen/gen/migrations"
)

// inlineTables lists the business tables of the package's inline methods,
// for the migration planner.
func inlineTables(p *ir.Package) []migrations.InlineTable {
	var out []migrations.InlineTable
	for _, r := range p.Receivers {
		for _, m := range r.Methods {
			if m.Inline != nil {
				out = append(out, migrations.InlineTable{Table: m.Inline.Table, Methods: []string{m.Key}})
			}
		}
	}
	return out
}
