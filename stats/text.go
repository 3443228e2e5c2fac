package stats

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Width is the widest line WriteText writes for names of up to
// maxName characters (longer ones are clipped).
const Width = 80

const maxName = 12

// WriteText writes the report for a terminal, no line wider than Width.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Fleet.Harvests == 0 {
		b.WriteString("no plans harvested yet\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	f, t := r.Fleet, r.Time
	fmt.Fprintf(&b, "%d plans (%d verification rounds), %d harvests, %d attempts, %d workers\n",
		f.Plans, f.Verifications, f.Harvests, f.Attempts, len(r.Workers))
	if t.Timed < t.Attempts {
		fmt.Fprintf(&b, "%d of %d attempts have a start and an end; the times below are theirs\n", t.Timed, t.Attempts)
	}
	if t.Timed > 0 {
		fmt.Fprintf(&b, "plan time %s over a span of %s: speed-up %s\n", dur(t.PlanTimeS), dur(t.SpanS), times(t.SpeedUp))
		wrap(&b, fmt.Sprintf("critical path %s (%s of the span):", dur(t.CriticalS), pct(t.CriticalShare)), t.CriticalPath, " >")
		var idle []string
		for _, i := range t.Idle {
			idle = append(idle, clip(i.Worker)+" "+pct(i.Share))
		}
		wrap(&b, "idle:", idle, ",")
		fmt.Fprintf(&b, "mean idle %s\n", pct(t.MeanIdle))
	}

	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	work := func(head string, rows []Row) {
		fmt.Fprintf(tw, "%s\tPLANS\tATTEMPTS\t1ST PASS\tREFUTED\tNEEDS INPUT\tMEDIAN WALL\n", head)
		for _, x := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\n", clip(x.Name), x.Plans, x.Attempts,
				share(x.FirstPass), share(x.Refuted), x.NeedsInput, wall(x.MedianWallS))
		}
	}
	work("PROFILE", append(append([]Row{}, r.Profiles...), f))
	tw.Flush()
	b.WriteString("\n")
	work("WORKER", r.Workers)
	tw.Flush()

	b.WriteString("\nper plan: the mean over the plans that reported it (reported/plans)\n")
	all := append(append(append([]Row{}, r.Profiles...), r.Workers...), f)
	fmt.Fprintln(tw, "\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST")
	for _, x := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clip(x.Name), tokens(x.InputTokens), tokens(x.OutputTokens),
			tokens(x.CacheRead), tokens(x.CacheWrite), cost(x.CostUSD))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap writes head and items (each but the last followed by sep) as lines
// of at most Width, continuation lines indented.
func wrap(b *strings.Builder, head string, items []string, sep string) {
	line := head
	for i, it := range items {
		if i < len(items)-1 {
			it += sep
		}
		if len(line)+1+len(it) > Width {
			b.WriteString(line + "\n")
			line = "   "
		}
		line += " " + it
	}
	b.WriteString(line + "\n")
}

func clip(s string) string {
	switch {
	case s == "":
		return "-"
	case len(s) > maxName:
		return s[:maxName-1] + "~"
	}
	return s
}

// dur is seconds as 1h05m, 25m00s, 40s or 0.6s.
func dur(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.1fs", s)
	}
	d := time.Duration(math.Round(s)) * time.Second
	switch {
	case d >= time.Hour:
		m := int(d.Round(time.Minute).Minutes())
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

func wall(m Measure) string {
	if m.Value == nil {
		return "-"
	}
	return dur(*m.Value)
}

func pct(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100**f)
}

func times(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *f)
}

func share(s Share) string {
	if s.Of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d %s", s.N, s.Of, pct(s.Rate))
}

func tokens(m Measure) string {
	v := "-"
	if m.Value != nil {
		switch x := *m.Value; {
		case x >= 1e6:
			v = fmt.Sprintf("%.2fM", x/1e6)
		case x >= 1e4:
			v = fmt.Sprintf("%.1fk", x/1e3)
		default:
			v = fmt.Sprintf("%.0f", x)
		}
	}
	return fmt.Sprintf("%s %d/%d", v, m.Have, m.Of)
}

func cost(m Measure) string {
	v := "-"
	if m.Value != nil {
		v = fmt.Sprintf("$%.2f", *m.Value)
	}
	return fmt.Sprintf("%s %d/%d", v, m.Have, m.Of)
}
