package broker

import (
	"fmt"
	"log/slog"
	"strings"
)

// logAdapter routes the server's log lines into the lead loop's slog
// logger. Fatalf only logs: the embedded server must never end the process.
type logAdapter struct {
	l *slog.Logger
	// leaf, when set, is told each time a leaf link is made: the server
	// says so only in its log (it has no callback for it).
	leaf func()
}

// leafCreated is how nats-server's notice of a new leaf link reads.
const leafCreated = "Leafnode connection created"

func (a *logAdapter) Noticef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "src", "nats")
	if a.leaf != nil && strings.Contains(format, leafCreated) {
		a.leaf()
	}
}
func (a *logAdapter) Warnf(format string, v ...any) {
	a.l.Warn(fmt.Sprintf(format, v...), "src", "nats")
}
func (a *logAdapter) Fatalf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "src", "nats")
}
func (a *logAdapter) Errorf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "src", "nats")
}
func (a *logAdapter) Debugf(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "src", "nats")
}
func (a *logAdapter) Tracef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "src", "nats")
}
