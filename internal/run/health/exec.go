package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

// waitDelay is how long a command's output may stay open after the
// command was killed or has exited (a child it left behind holding the
// pipe) before Do stops waiting for it.
const waitDelay = time.Second

// maxOutput bounds the output of a command kept for its pattern.
const maxOutput = 64 << 10

// run is an exec call: argv without a shell, OK on exit status 0. With
// keep it also returns the first maxOutput bytes of the output, for a
// pattern.
func run(ctx context.Context, call config.Call, d config.TemplateData, timeout time.Duration, keep bool) (Result, string) {
	argv := make([]string, len(call.Exec))
	for i, a := range call.Exec {
		v, err := config.Render(a, d)
		if err != nil {
			return Result{Detail: fmt.Sprintf("exec arg %d: %v", i, err)}, ""
		}
		argv[i] = v
	}
	what := "exec " + shorten(strings.Join(argv, " "), 100)
	if strings.TrimSpace(argv[0]) == "" {
		return Result{Detail: what + ": no program to run"}, ""
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out := &tail{max: outputTail}
	var w io.Writer = out
	first := &headBuf{max: maxOutput}
	if keep {
		w = io.MultiWriter(out, first)
	}
	cmd.Stdout, cmd.Stderr = w, w // one pipe, one writer at a time
	cmd.WaitDelay = waitDelay
	killGroup(cmd)
	err := cmd.Run()

	var detail string
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		detail = "exit status 0"
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		detail = fmt.Sprintf("killed: no exit within %s", timeout)
	case ctx.Err() != nil:
		detail = "killed: canceled"
	case errors.As(err, &exitErr):
		detail = exitErr.ProcessState.String() // "exit status 3", "signal: killed"
	default:
		detail = err.Error() // not found, not executable
	}
	if s := oneLine(out.String()); s != "" {
		detail += ": " + s
	}
	return Result{OK: err == nil, Detail: what + ": " + detail}, string(first.b)
}

// headBuf is an io.Writer that keeps the first max bytes written.
type headBuf struct {
	max int
	b   []byte
}

func (h *headBuf) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// tail is an io.Writer that keeps the last max bytes written.
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[:copy(t.b, t.b[over:])]
	}
	return n, nil
}

func (t *tail) String() string { return string(t.b) }

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
