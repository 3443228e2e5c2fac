package bus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/event"
)

func TestEscapeKeepsTextOnOneVisibleLine(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "tests pass on go 1.24", "tests pass on go 1.24"},
		{"newline and tab", "a\nb\tc\r", `a\nb\tc\x0d`},
		{"terminal escape", "\x1b[31mred\x1b]0;title\x07", `\x1b[31mred\x1b]0;title\x07`},
		{"C1 control", "x\u009by", `x\u009by`},
		{"invalid utf-8", "a\xffb", `a\xffb`},
		{"bidi override", "ok\u202egnp.exe", `ok\u202egnp.exe`},
		{"zero width and separators", "a\u200bb\u2028c\u2029d", `a\u200bb\u2028c\u2029d`},
		{"unicode kept", "naïve café ✓", "naïve café ✓"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Escape(tc.in)
			if got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.ContainsAny(got, "\n\r\x1b\x07") {
				t.Errorf("Escape(%q) = %q still holds a control character", tc.in, got)
			}
		})
	}
}

func TestParseTrustsTheSubjectNotThePayload(t *testing.T) {
	e := event.New(event.Say, "", "found \x1b[2Jit", "w1", "h")
	e.Time = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := Parse("orch", "orch.bus.w1.fleet", e.Marshal(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if m.Line() != `#7 2025-01-02T03:04:05Z w1 [fleet]: found \x1b[2Jit` {
		t.Errorf("line %q", m.Line())
	}
	cases := []struct{ name, subject string }{
		{"another worker's subject", "orch.bus.w2.fleet"},
		{"another topic", "orch.bus.w1.topic.x"},
		{"not the bus", "orch.ev.w1.say"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse("orch", tc.subject, e.Marshal(), 1); !errors.Is(err, ErrNotSay) {
				t.Errorf("Parse on %s: %v, want ErrNotSay", tc.subject, err)
			}
		})
	}
	done := event.New(event.Done, "p", "ok", "w1", "h")
	if _, err := Parse("orch", "orch.bus.w1.fleet", done.Marshal(), 1); !errors.Is(err, ErrNotSay) {
		t.Errorf("a done on the bus: %v, want ErrNotSay", err)
	}
}

// The topic shown comes from the subject, which the sender picks: one that
// is not a plan's or a named topic's (say, one holding a terminal escape)
// is no say, and nothing of it is shown.
func TestParseRefusesABadTopic(t *testing.T) {
	for _, tc := range []struct{ name, plan, topic, tail string }{
		{"named topic with an escape", "", "x\x1b]0;owned\x07", "topic.x\x1b]0;owned\x07"},
		{"plan topic with an escape", "p\x1b[2J", "", "plan.p\x1b[2J"},
		{"named topic in capitals", "", "X", "topic.X"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := event.New(event.Say, "", "text", "w1", "h")
			e.Plan, e.Topic = tc.plan, tc.topic
			m, err := Parse("orch", "orch.bus.w1."+tc.tail, e.Marshal(), 1)
			if !errors.Is(err, ErrNotSay) {
				t.Fatalf("Parse: %q, %v; want ErrNotSay", m.Line(), err)
			}
		})
	}
}
