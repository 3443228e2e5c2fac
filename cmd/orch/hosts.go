package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/hostd"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/logfmt"
	"github.com/orch-dev/orch/internal/orchctl"
)

func newHostsCmd(s streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "The other machines that run this lead's workers: list, add, remove",
		Args:  exactArgs(0, "no arguments (or add NAME, remove NAME)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := repoRoot(cmd.Context())
			if err != nil {
				return err
			}
			hs, err := orchctl.Hosts(root)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(s.Out, hs)
			}
			printHosts(s, hs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	var workers int
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Register a host; prints the line to run on it (with its one-time token)",
		Args:  exactArgs(1, "the host's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := repoRoot(cmd.Context())
			if err != nil {
				return err
			}
			a, err := orchctl.HostsAdd(root, args[0], workers)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "added host %s with workers %s; run this on it, in its clone of this repo:\n\n  %s\n\n",
				a.Host.Name, strings.Join(a.Host.Workers, ","), a.JoinLine())
			fmt.Fprintln(s.Out, "The token is the host's key: it is shown only now and kept nowhere here (orch hosts remove, then add, makes a new one).")
			if a.Leaf == "" {
				fmt.Fprintln(s.Out, "No lead loop with --leaf is running: put the address hosts reach it at in the line (orch serve --leaf ADDR:PORT).")
			}
			return nil
		},
	}
	add.Flags().IntVar(&workers, "workers", 1, "how many workers run on the host")
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Revoke a host: its key, its link, and its workers' events are refused from now on",
		Args:  exactArgs(1, "the host's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := repoRoot(cmd.Context())
			if err != nil {
				return err
			}
			h, err := orchctl.HostsRemove(root, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "removed host %s (workers %s)", h.Name, strings.Join(h.Workers, ","))
			if orchctl.Serving(root) {
				fmt.Fprint(s.Out, "; the lead loop cuts its link now")
			}
			fmt.Fprintln(s.Out)
			return nil
		},
	}
	cmd.AddCommand(add, remove)
	return cmd
}

func printHosts(s streams, hs []orchctl.HostView) {
	if len(hs) == 0 {
		fmt.Fprintln(s.Out, "no hosts (orch hosts add NAME registers one)")
		return
	}
	tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tWORKERS\tLINK\tSEEN\tLAG\tADDR\t")
	for _, h := range hs {
		link, seen, lag, addr := "?", "-", "-", "-"
		if l := h.Link; l != nil {
			link = "down"
			if l.Up {
				link = "up"
			}
			if l.Seen >= 0 {
				seen = l.Seen.Round(time.Millisecond).String() + " ago"
			}
			lag, addr = fmt.Sprint(l.Lag), dash(l.Addr)
			if l.Error != "" {
				link += " (" + l.Error + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, strings.Join(h.Workers, ","), link, seen, lag, addr, h.Note)
	}
	tw.Flush()
}

func newHostCmd(s streams) *cobra.Command {
	var token, tokenFile string
	var port int
	var verbose, panes bool
	var agentCmd, remote string
	join := &cobra.Command{
		Use:   "join LEAD-URL (--token TOKEN | --token-file FILE)",
		Short: "Run this machine as a host of a lead (in its clone of the lead's repo), until stopped",
		Args:  exactArgs(1, "the lead's URL, nats-leaf://ADDR:PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := joinToken(token, tokenFile)
			if err != nil {
				return err
			}
			if strings.TrimSpace(agentCmd) == "" {
				return usagef("orch host join needs --agent (the agent this host's workers run, as orch serve's)")
			}
			if _, err := exec.LookPath("tmux"); panes && err != nil {
				return usagef("orch host join --tmux needs tmux on PATH: install it, or join without --tmux (workers run headless)")
			}
			profile, err := resolveAgent(cmd.Context(), agentCmd)
			if err != nil {
				return err
			}
			root, err := repoRoot(cmd.Context())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(logfmt.NewLineHandler(s.Err, level))
			return hostd.Join(ctx, hostd.Config{Root: root, LeadURL: args[0], Token: tok, Port: port, Log: log,
				Agent: agentCmd, Profile: profile, BinDir: binDir(), Remote: remote, Tmux: panes, TmuxSocket: tmuxSocket(),
				Ready: func(h *broker.HostServer) {
					fmt.Fprintf(s.Out, "host running: workers here run orch-notify as usual (it finds %s)\n", h.URL())
				}})
		},
	}
	join.Flags().StringVar(&token, "token", "", "the token orch hosts add printed (or use --token-file, or ORCH_HOST_TOKEN, to keep it out of your shell's history)")
	join.Flags().StringVar(&tokenFile, "token-file", "", "a file holding the token (mode 0600)")
	join.Flags().IntVar(&port, "port", 0, "loopback port for this host's workers (default: the last one if free, else any)")
	join.Flags().StringVar(&agentCmd, "agent", "", "agent profile (claude, codex, gemini, aider, or one from orch.yaml) or command this host's workers run")
	join.Flags().BoolVar(&panes, "tmux", false, "run each worker in a tmux pane of its own on this machine's tmux server (ORCH_TMUX_SOCKET names a socket, as for orch serve), instead of headless")
	join.Flags().StringVar(&remote, "remote", "origin", "the clone's git remote the lead's commits are fetched from (the lead's repo)")
	join.Flags().BoolVarP(&verbose, "verbose", "v", false, "log debug lines (including the NATS server's)")
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Work for a lead from this machine (orch host join)",
		Args:  exactArgs(0, "a subcommand: join"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(join)
	return cmd
}

// joinToken is the token from the flag, the file or the environment,
// exactly one of them.
func joinToken(flag, file string) (string, error) {
	env := os.Getenv("ORCH_HOST_TOKEN")
	n := 0
	for _, v := range []string{flag, file, env} {
		if v != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return "", fmt.Errorf("%w: give the token orch hosts add printed: --token, --token-file or ORCH_HOST_TOKEN", hosts.ErrToken)
	case n > 1:
		return "", fmt.Errorf("%w: give the token one way only (--token, --token-file or ORCH_HOST_TOKEN)", hosts.ErrToken)
	case file != "":
		fi, err := os.Stat(file)
		if err != nil {
			return "", err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("%w: %s is readable by others (mode %v): chmod 600 %s", broker.ErrCredsMode, file, fi.Mode().Perm(), file)
		}
		data, err := os.ReadFile(file)
		return strings.TrimSpace(string(data)), err
	case env != "":
		return env, nil
	}
	return flag, nil
}
