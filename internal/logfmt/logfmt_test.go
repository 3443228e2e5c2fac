package logfmt

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLineHandler(t *testing.T) {
	for name, tt := range map[string]struct {
		level slog.Level
		msg   string
		attrs []any
		want  string // after the time stamp, without the logger's a=1
	}{
		"plain":   {slog.LevelInfo, "harvested", []any{"plan", "api", "worker", "w2"}, "harvested plan=api worker=w2\n"},
		"warn":    {slog.LevelWarn, "gate failed", []any{"plan", "api"}, "WARN gate failed plan=api\n"},
		"quoted":  {slog.LevelInfo, "refused", []any{"why", "a b", "empty", ""}, `refused why="a b" empty=""` + "\n"},
		"control": {slog.LevelInfo, "two\nlines", []any{"text", "x\ny\x1b[2J"}, `two lines text="x\ny\x1b[2J"` + "\n"},
	} {
		var b bytes.Buffer
		slog.New(NewLineHandler(&b, slog.LevelInfo)).With("a", 1).Log(t.Context(), tt.level, tt.msg, tt.attrs...)
		_, got, _ := strings.Cut(b.String(), " ")
		if !strings.Contains(got, " a=1") || strings.Count(got, "\n") != 1 {
			t.Errorf("%s: %q; want one line carrying a=1", name, b.String())
		}
		if got = strings.Replace(got, " a=1", "", 1); got != tt.want {
			t.Errorf("%s: %q; want %q", name, got, tt.want)
		}
	}
	var b bytes.Buffer
	slog.New(NewLineHandler(&b, slog.LevelWarn)).Info("dropped")
	if b.Len() != 0 {
		t.Errorf("below the level: %q; want nothing", b.String())
	}
}
