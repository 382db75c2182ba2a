package demo

import (
	"context"
	"fmt"
	"time"
)

// Processes says which process each member (the load balancer too) is
// now: its pid and start time. The same answer after a step means no
// member restarted (ferry self-upgrade's tests); a member not running
// is an error naming it.
func (cl *Cluster) Processes(ctx context.Context) (map[string]string, error) {
	sts, err := cl.Driver.Observe(ctx, cl.Members)
	if err != nil {
		return nil, fmt.Errorf("demo: observe: %w", err)
	}
	out := make(map[string]string, len(sts))
	for _, st := range sts {
		if !st.Running || st.PID == 0 {
			return nil, fmt.Errorf("demo: member %s is not running (%s)", st.Name, st.Detail)
		}
		out[st.Name] = fmt.Sprintf("pid %d since %s", st.PID, st.Since.UTC().Format(time.RFC3339Nano))
	}
	return out, nil
}
