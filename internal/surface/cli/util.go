package cli

import (
	"encoding/json"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
)

// phaseMembers lists a phase's members in plan order, skipped ones last.
func phaseMembers(batches []plan.Batch, skipped []plan.Skipped) []string {
	var out []string
	for _, b := range batches {
		out = append(out, b.Members...)
	}
	for _, s := range skipped {
		out = append(out, s.Member)
	}
	return out
}

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
