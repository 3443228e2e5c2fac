package main

import (
	"context"
	"fmt"
	"os"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/spf13/cobra"
)

type initOptions struct {
	Dir  string
	JSON bool
}

func newInitCmd(s streams) *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Prepare this repo for orch: .orch/ (git-ignored), plans/, the ledger",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Dir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				o.Dir = wd
			}
			return initRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().StringVarP(&o.Dir, "dir", "C", "", "directory to initialise (default: the working directory)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	return cmd
}

func initRun(ctx context.Context, o *initOptions, s streams) error {
	res, err := orchctl.Init(ctx, o.Dir)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, res)
	}
	switch {
	case res.Commit != "":
		fmt.Fprintf(s.Out, "initialised %s (commit %.10s)\n", res.Root, res.Commit)
	default:
		fmt.Fprintf(s.Out, "%s is already initialised\n", res.Root)
	}
	return nil
}
