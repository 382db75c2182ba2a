package engine

import (
	"context"
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// WorkloadOf is the driver's view of a component's workload, or nil.
func WorkloadOf(comp *config.Component) *driver.Workload {
	w := comp.Workload
	if w == nil {
		return nil
	}
	return &driver.Workload{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Selector: w.Selector,
		Container: w.Container, Upgrade: append([]string(nil), w.Upgrade...), DrainTimeout: w.DrainTimeout.D(), Per: w.Per, Update: w.Update}
}

// Discover fills in the members of every component that names a
// workload and lists none, from the driver (the pods or nodes it finds
// now). It is called before New; a driver that cannot discover, or a
// workload without members, is an error naming the component.
func Discover(ctx context.Context, c *config.Cluster, d driver.Driver) error {
	seen := map[string]string{} // member name -> component
	for i := range c.Components {
		for _, m := range c.Components[i].Members {
			seen[m.Name] = c.Components[i].Name
		}
	}
	for i := range c.Components {
		comp := &c.Components[i]
		w := WorkloadOf(comp)
		if w == nil || len(comp.Members) > 0 {
			continue
		}
		disc, ok := d.(driver.Discoverer)
		if !ok {
			return fmt.Errorf("component %s: its members are not listed and the %s driver cannot find them", comp.Name, c.Substrate)
		}
		ms, err := disc.Discover(ctx, comp.Name, *w)
		if err != nil {
			return fmt.Errorf("component %s: finding the members of %s %s: %w", comp.Name, w.Kind, workloadName(w), err)
		}
		if len(ms) == 0 {
			return fmt.Errorf("component %s: %s %s has no members", comp.Name, w.Kind, workloadName(w))
		}
		for _, m := range ms {
			if other, dup := seen[m.Name]; dup {
				return fmt.Errorf("component %s: member %s is also a member of %s: member names are unique across the cluster", comp.Name, m.Name, other)
			}
			seen[m.Name] = comp.Name
			comp.Members = append(comp.Members, config.Member{Name: m.Name, Host: m.Host, Domain: m.Domain, Address: m.Address, Labels: m.Labels})
		}
	}
	return nil
}

func workloadName(w *driver.Workload) string {
	switch {
	case w.Kind == config.KindNodePool:
		return "with nodes " + w.Selector
	case w.Name != "":
		return w.Namespace + "/" + w.Name
	default:
		return "in " + w.Namespace + " selected by " + w.Selector
	}
}
