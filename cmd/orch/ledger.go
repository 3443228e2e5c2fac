package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/ledger"
)

type ledgerOptions struct {
	JSON     bool
	Due      bool
	ID       int
	Measured float64
	Outcome  string
}

func newLedgerCmd(s streams) *cobra.Command {
	o := &ledgerOptions{}
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "The bet ledger: every harvested plan, and bets with a baseline and a check-by date",
		Args:  exactArgs(0, "a subcommand: list, due or settle"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return ledgerListRun(cmd.Context(), o, s) },
	}
	cmd.PersistentFlags().BoolVar(&o.JSON, "json", false, "print a JSON list of entries")
	list := &cobra.Command{
		Use:   "list",
		Short: "List every entry",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return ledgerListRun(cmd.Context(), o, s) },
	}
	due := &cobra.Command{
		Use:   "due",
		Short: "List open bets whose check-by date has come",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Due = true
			return ledgerListRun(cmd.Context(), o, s)
		},
	}
	settle := &cobra.Command{
		Use:   "settle <id> --measured V --outcome won|lost",
		Short: "Record a bet's measured value and outcome (committed)",
		Args:  exactArgs(1, "one entry id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.Atoi(args[0])
			if err != nil || id <= 0 {
				return usagef("entry id %q is not a positive number", args[0])
			}
			if !cmd.Flags().Changed("measured") {
				return usagef("--measured is required")
			}
			if o.Outcome != ledger.Won && o.Outcome != ledger.Lost {
				return usagef("--outcome must be won or lost")
			}
			o.ID = id
			return ledgerSettleRun(cmd.Context(), o, s)
		},
	}
	settle.Flags().Float64Var(&o.Measured, "measured", 0, "the metric's measured value")
	settle.Flags().StringVar(&o.Outcome, "outcome", "", "won or lost")
	check := &cobra.Command{
		Use:   "check",
		Short: "Re-run the metric command of every due bet now and settle it against its target (committed)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return ledgerCheckRun(cmd.Context(), o, s) },
	}
	cmd.AddCommand(list, due, check, settle)
	return cmd
}

func ledgerListRun(ctx context.Context, o *ledgerOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	entries, err := ledger.Load(root)
	if err != nil {
		return err
	}
	if o.Due {
		entries = ledger.Due(entries, time.Now())
	}
	if entries == nil {
		entries = []ledger.Entry{}
	}
	if o.JSON {
		return writeJSON(s.Out, entries)
	}
	printLedger(s, entries)
	return nil
}

func printLedger(s streams, entries []ledger.Entry) {
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPLAN\tWORKER\tCOMMIT\tTIME\tBET\tSTATUS")
	for _, e := range entries {
		bet := "-"
		if e.IsBet() {
			bet = fmt.Sprintf("%s %s", e.Metric, e.Outcome)
			if e.CheckBy != "" {
				bet += " by " + e.CheckBy
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.10s\t%s\t%s\t%s\n", e.ID, e.Plan, e.Worker, e.Commit, e.Time.Local().Format("2006-01-02 15:04"), bet, clip(e.Status, 60))
	}
	tw.Flush()
}

func ledgerSettleRun(ctx context.Context, o *ledgerOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	e, err := orchctl.Settle(ctx, root, o.ID, o.Measured, o.Outcome, time.Now())
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, e)
	}
	fmt.Fprintf(s.Out, "ledger #%d (%s): %s, measured %g\n", e.ID, e.Plan, e.Outcome, o.Measured)
	return nil
}

func ledgerCheckRun(ctx context.Context, o *ledgerOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	res, err := orchctl.CheckBets(ctx, root, time.Now)
	if o.JSON {
		if werr := writeJSON(s.Out, res); werr != nil {
			return werr
		}
		return err
	}
	for _, r := range res {
		if r.Error != "" {
			fmt.Fprintf(s.Out, "ledger #%d (%s): not measured: %s; still open\n", r.ID, r.Plan, r.Error)
			continue
		}
		fmt.Fprintf(s.Out, "ledger #%d (%s): %s, measured %g\n", r.ID, r.Plan, r.Outcome, *r.Measured)
	}
	if len(res) == 0 && err == nil && !o.JSON {
		fmt.Fprintln(s.Out, "no bets due")
	}
	return err
}
