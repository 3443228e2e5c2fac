// Command orch is the lead's side of orch: it runs the lead loop (serve),
// writes and dispatches plans, waits for callbacks and reads the ledger.
// Each verb lives in its own file: an options struct, and a RunE that calls
// a function taking those options. Only main exits.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// streams are where a command reads and writes; tests pass buffers.
type streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode is a command's own exit code, with nothing to print (a hook's
// answer to Claude Code).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func main() {
	s := streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	os.Exit(run(os.Args[1:], s))
}

// run executes the command line and maps its error to an exit code: the
// one place where errors become exit codes.
func run(args []string, s streams) int {
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(s.Err, "orch: %v\n", err)
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitError
}

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "orch",
		Short:         "Event-driven callback orchestrator for fleets of coding agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newInitCmd(s),
		newServeCmd(s),
		newPlanCmd(s),
		newDispatchCmd(s),
		newVerifyCmd(s),
		newIntegrateCmd(s),
		newReportCmd(s),
		newStatusCmd(s),
		newWatchCmd(s),
		newWaitCmd(s),
		newReadCmd(s),
		newSendCmd(s),
		newBusCmd(s),
		newLedgerCmd(s),
		newStatsCmd(s),
		newDownCmd(s),
		newDoctorCmd(s),
		newHostsCmd(s),
		newHostCmd(s),
		newDemoCmd(s),
		newAgentCmd(s),
		newLeadCmd(s),
		newInboxCmd(s),
		newAckCmd(s),
	)
	return root
}
