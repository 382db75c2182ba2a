package kv

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's logs through slog, so that a kv
// member writes one log format to stderr instead of two.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *slog.LevelVar
}

func newHclogAdapter(l *slog.Logger, level slog.Level) hclog.Logger {
	lv := new(slog.LevelVar)
	lv.Set(level)
	return &hclogAdapter{l: l, name: "raft", level: lv}
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	case hclog.Off:
		return slog.LevelError + 100
	}
	return slog.LevelInfo
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := toSlogLevel(level)
	if lv < a.level.Level() {
		return
	}
	all := make([]any, 0, len(a.args)+len(args)+2)
	all = append(all, "logger", a.name)
	all = append(all, a.args...)
	all = append(all, args...)
	a.l.Log(context.Background(), lv, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool { return toSlogLevel(l) >= a.level.Level() }
func (a *hclogAdapter) IsTrace() bool              { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool              { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool               { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool               { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool              { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Set(toSlogLevel(level)) }

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch l := a.level.Level(); {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slog.LevelInfo)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}
