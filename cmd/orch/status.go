package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/state"
)

type statusOptions struct{ JSON bool }

func newStatusCmd(s streams) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Workers and plans, from recorded events and git (never from the screen)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return statusRun(cmd.Context(), o, s) },
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON document")
	return cmd
}

func statusRun(ctx context.Context, o *statusOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	v, err := orchctl.Status(root)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, v)
	}
	printStatus(s, v)
	return nil
}

func printStatus(s streams, v orchctl.StatusView) {
	if v.Serving {
		fmt.Fprintf(s.Out, "lead loop: running (pid %d)\n", v.PID)
	} else {
		fmt.Fprintln(s.Out, "lead loop: not running")
	}
	if v.External != nil {
		fmt.Fprintf(s.Out, "broker: %s\n", v.External)
	}
	if d := v.TmuxDown; d != nil {
		fmt.Fprintf(s.Out, "tmux: not answering since %s; plans go to headless workers (orch serve started again brings the panes back once tmux answers): %s\n", d.Since.Local().Format("2006-01-02 15:04:05"), clip(d.Reason, 120))
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tPLAN\tPANE\tAGENT\t")
	for _, w := range v.Workers {
		pane := dash(w.Pane)
		if w.Headless && v.TmuxDown != nil {
			pane = "headless"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.ID, w.State, dash(w.Plan), pane, dash(w.Profile), w.Reason)
	}
	tw.Flush()
	fmt.Fprintln(s.Out)
	tw = tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tSTATE\tWORKER\tVERIFIER\tDEPENDS ON\tNOTE")
	for _, p := range v.Plans {
		note := p.Waiting
		switch {
		case p.Reason != "":
			note = p.Reason
		case p.State == state.PlanDone:
			note = p.Status
		}
		if note == "" {
			note = p.Retry // why this attempt is a retry (a worker died, a context ran out)
		}
		if len(p.Stale) > 0 {
			note = "STALE BASE: " + strings.Join(p.Stale, ", ") + "; " + note
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.State, dash(p.Worker), dash(p.Verifier), dash(strings.Join(p.DependsOn, ",")), clip(note, 70))
	}
	tw.Flush()
	if len(v.Hosts) > 0 {
		fmt.Fprintln(s.Out)
		printHosts(s, v.Hosts)
	}
	for _, r := range v.Rejected {
		fmt.Fprintf(s.Out, "refused %s %s from %s: %s\n", r.Kind, r.Plan, dash(r.Worker), r.Reason)
	}
	for id, e := range v.Errors {
		fmt.Fprintf(s.Out, "not yet handled (retrying): event %s: %s\n", id, e)
	}
	if v.SetAside > 0 {
		fmt.Fprintf(s.Out, "spool: %d files were not events and are set aside in .orch/spool/rejected/ (the .why beside each says why)\n", v.SetAside)
	}
	if r := v.Rebuilt; r != nil {
		fmt.Fprintf(s.Out, "record rebuilt from git %s (%s): %s\n", r.Time.Local().Format("2006-01-02 15:04"), r.Why, r.Summary)
		if r.Kept != "" {
			fmt.Fprintf(s.Out, "  the unreadable record it replaced is kept as %s\n", r.Kept)
		}
	}
	for _, p := range v.Problems {
		fmt.Fprintf(s.Out, "problem: %s\n", p)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
