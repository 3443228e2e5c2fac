// Package logfmt is the log handler orch serve and orch demo write with:
// one short human line per slog record, its attributes as key=value pairs,
// quoted where a value could break the line or drive the reader's terminal.
package logfmt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// LineHandler is a slog.Handler that writes one short human line per
// record: "15:04:05.000 harvested plan=api worker=w2 commit=1a2b3c4d5e".
// orch serve and orch demo use it so each event is one readable line.
type LineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Leveler
	attrs []slog.Attr
}

// NewLineHandler returns a LineHandler writing records at or above level.
func NewLineHandler(w io.Writer, level slog.Leveler) *LineHandler {
	return &LineHandler{mu: &sync.Mutex{}, w: w, level: level}
}

// Enabled implements slog.Handler.
func (h *LineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle implements slog.Handler.
func (h *LineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05.000"))
	if r.Level >= slog.LevelWarn {
		b.WriteString(" " + r.Level.String())
	}
	b.WriteString(" " + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, r.Message))
	write := func(a slog.Attr) bool {
		v := a.Value.Resolve().String()
		// Quoting escapes newlines and terminal control characters, so one
		// record stays one line and cannot drive the reader's terminal.
		if v == "" || strings.ContainsAny(v, " \"=\\") || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) }) >= 0 {
			v = fmt.Sprintf("%q", v)
		}
		b.WriteString(" " + a.Key + "=" + v)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// WithAttrs implements slog.Handler.
func (h *LineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

// WithGroup implements slog.Handler; groups are flattened.
func (h *LineHandler) WithGroup(string) slog.Handler { return h }
