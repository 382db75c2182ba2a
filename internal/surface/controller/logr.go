package controller

import (
	"log/slog"

	"github.com/go-logr/logr"
)

// logrFromSlog gives controller-runtime (which logs through logr) the
// process's slog handler.
func logrFromSlog(l *slog.Logger) logr.Logger { return logr.FromSlogHandler(l.Handler()) }
