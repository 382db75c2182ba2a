package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/core/plan"
	"github.com/ferry-upgrade/ferry/internal/surface/api"
)

// printHostsPhase writes hosts phase ph (number i) of a plan: one row
// per host batch, its hosts and their members, each host's in the
// components' order; the components' own settings and the members
// skipped after it.
func printHostsPhase(w io.Writer, i int, ph plan.Phase) {
	h := ph.Hosts
	what := fmt.Sprintf("hosts: max_unavailable %d host%s", h.MaxUnavailable, map[bool]string{true: "s"}[h.MaxUnavailable != 1])
	if h.MaxUnavailablePerDomain > 0 {
		what += fmt.Sprintf(", %d per domain", h.MaxUnavailablePerDomain)
	}
	for j, b := range ph.Batches {
		var hosts []string
		for _, hn := range b.Hosts {
			hosts = append(hosts, hn+" ("+strings.Join(h.On[hn], ", ")+")")
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", i+1, ph.Component, what, j+1, strings.Join(hosts, "; "))
		what = ""
	}
	for _, s := range ph.Skipped {
		fmt.Fprintf(w, "%d\t%s\t%s\t-\t%s (skipped: %s)\n", i+1, ph.Component, what, s.Member, s.Reason)
		what = ""
	}
	for _, part := range h.Parts {
		s := fmt.Sprintf("%s, max_unavailable %d", part.Strategy, part.MaxUnavailable)
		if part.Quorum > 0 {
			s += fmt.Sprintf(", quorum %d", part.Quorum)
		}
		fmt.Fprintf(w, "\t\tthen on each host: %s (%s)\t\t\n", part.Component, s)
	}
	if ph.Note != "" {
		fmt.Fprintf(w, "\t\tnote: %s\t\t\n", ph.Note)
	}
}

// hostsLine says where each host of an upgrade's hosts stages stands:
// "h1 done, h2 locked, h3 pending".
func hostsLine(u api.Upgrade) string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(u.Hosts)) {
		out = append(out, n+" "+u.Hosts[n].Step)
	}
	return strings.Join(out, ", ")
}
